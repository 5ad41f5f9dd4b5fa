//! The JSON backend over `state/store.json` (SPEC §14.5) with the §19.39 bugs fixed.
//!
//! The file keeps the original's exact shape: `threads` keyed by thread id, `turns` keyed by
//! THREAD id holding arrays of turns with nested `toolCalls`, `metadata {version, lastUpdated}`,
//! pretty-printed with two spaces and no trailing newline. Keys this version does not know, at
//! any level, survive a read-modify-write; an entry that does not parse is kept verbatim and
//! skipped by reads.
//!
//! Across processes: every mutation holds an exclusive advisory lock on `store.json.lock`,
//! re-reads the file if another process changed it, applies the change and rewrites the file
//! atomically ([`fsutil::write_atomic`], 0600). Reads re-read it when changed. "Changed" is a
//! different (device, inode, size, mtime, ctime); because file times are coarse, a file modified
//! in the last two seconds is never trusted on its stamp alone and its bytes are compared
//! instead (the "racy clean" rule). A file that does not parse is moved aside to
//! `store.json.corrupt-<ms>` by the next mutation, never overwritten.

use std::collections::{HashMap, HashSet};

use std::hash::{Hash, Hasher};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::sqlite::dedupe_calls;
use super::types::{
    NewThread, NewToolCall, NewTurn, StoredThread, StoredTurn, StoredTurnItemsView, ThreadFilter,
    ThreadUpdate, cmp_calls, cmp_threads, cmp_turns, search_matches,
};
use super::{BackendKind, ThreadStore, unique_id};
use crate::error::{IoContext, Result, StoreError};
use crate::fsutil;

/// A file modified this recently is re-read even when its stamp is unchanged.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// The thread store in one JSON file.
#[derive(Debug)]
pub struct JsonThreadStore {
    path: PathBuf,
    lock_path: PathBuf,
    sync: bool,
    cache: Mutex<Cache>,
}

/// What identifies one version of the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        Self {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Modified so recently that a later change could share the stamp.
    fn racy(m: &std::fs::Metadata) -> bool {
        m.modified()
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_none_or(|age| age < RACY_WINDOW)
    }
}

#[derive(Debug, Default)]
struct Cache {
    doc: Doc,
    /// Whether `doc` reflects the file as of `stamp`.
    loaded: bool,
    /// `None`: the file did not exist.
    stamp: Option<Stamp>,
    hash: u64,
    /// Why the file did not parse (it is moved aside by the next mutation).
    corrupt: Option<String>,
}

fn hash_bytes(b: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    b.hash(&mut h);
    h.finish()
}

// ---- the document ----------------------------------------------------------------------------

/// An entry that parsed, or the raw value of one that did not (written back unchanged).
#[derive(Debug, Clone)]
enum Slot<T> {
    Ok(T),
    Bad(Value),
}

impl<T: Serialize> Serialize for Slot<T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Ok(t) => t.serialize(s),
            Self::Bad(v) => v.serialize(s),
        }
    }
}

impl<T> Slot<T> {
    fn ok(&self) -> Option<&T> {
        match self {
            Self::Ok(t) => Some(t),
            Self::Bad(_) => None,
        }
    }

    fn ok_mut(&mut self) -> Option<&mut T> {
        match self {
            Self::Ok(t) => Some(t),
            Self::Bad(_) => None,
        }
    }
}

/// A thread's turn list: an array, or a value that is not one (kept, unusable).
#[derive(Debug, Clone)]
enum TurnList {
    Ok(Vec<Slot<StoredTurn>>),
    Bad(Value),
}

impl Serialize for TurnList {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Ok(v) => v.serialize(s),
            Self::Bad(v) => v.serialize(s),
        }
    }
}

/// `store.json` in memory, with lookup tables rebuilt by [`Doc::reindex`].
#[derive(Debug, Clone, Default)]
struct Doc {
    threads: Vec<(String, Slot<StoredThread>)>,
    turns: Vec<(String, TurnList)>,
    metadata: Map<String, Value>,
    extra: Map<String, Value>,
    thread_pos: HashMap<String, usize>,
    list_pos: HashMap<String, usize>,
    /// turn id → the key of the list holding it (first occurrence).
    turn_list: HashMap<String, String>,
    call_ids: HashSet<String>,
}

struct Entries<'a, T>(&'a [(String, T)]);

impl<T: Serialize> Serialize for Entries<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl Serialize for Doc {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("threads", &Entries(&self.threads))?;
        m.serialize_entry("turns", &Entries(&self.turns))?;
        m.serialize_entry("metadata", &self.metadata)?;
        for (k, v) in &self.extra {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

fn parse_slot<T: for<'de> Deserialize<'de>>(what: &str, key: &str, v: Value) -> Slot<T> {
    match T::deserialize(&v) {
        Ok(t) => Slot::Ok(t),
        Err(e) => {
            tracing::warn!(what, key, error = %e, "store.json: entry does not parse; kept as is");
            Slot::Bad(v)
        }
    }
}

impl Doc {
    fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let root: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let Value::Object(mut root) = root else {
            return Err("the top level is not an object".to_owned());
        };
        let mut doc = Self::default();
        match root.shift_remove("threads") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let mut slot = parse_slot::<StoredThread>("thread", &k, v);
                    if let Slot::Ok(t) = &mut slot
                        && t.id.is_empty()
                    {
                        t.id.clone_from(&k);
                    }
                    doc.threads.push((k, slot));
                }
            }
            Some(_) => return Err("\"threads\" is not an object".to_owned()),
        }
        match root.shift_remove("turns") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, v) in m {
                    let list = match v {
                        Value::Array(items) => TurnList::Ok(
                            items
                                .into_iter()
                                .map(|t| parse_slot::<StoredTurn>("turn", &k, t))
                                .collect(),
                        ),
                        other => {
                            tracing::warn!(key = %k, "store.json: a turn list is not an array");
                            TurnList::Bad(other)
                        }
                    };
                    doc.turns.push((k, list));
                }
            }
            Some(_) => return Err("\"turns\" is not an object".to_owned()),
        }
        match root.shift_remove("metadata") {
            Some(Value::Object(m)) => doc.metadata = m,
            None | Some(Value::Null) => {}
            Some(other) => {
                doc.extra.insert("metadata".to_owned(), other);
            }
        }
        doc.extra.extend(root);
        doc.reindex();
        Ok(doc)
    }

    /// Rebuilds the lookup tables (after a load or a structural change).
    fn reindex(&mut self) {
        self.thread_pos = self
            .threads
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        self.list_pos = self
            .turns
            .iter()
            .enumerate()
            .map(|(i, (k, _))| (k.clone(), i))
            .collect();
        self.turn_list.clear();
        self.call_ids.clear();
        for (key, list) in &self.turns {
            let TurnList::Ok(items) = list else { continue };
            for t in items.iter().filter_map(Slot::ok) {
                self.turn_list
                    .entry(t.id.clone())
                    .or_insert_with(|| key.clone());
                for c in t.tool_calls.iter().flatten() {
                    self.call_ids.insert(c.id.clone());
                }
            }
        }
    }

    /// Sets `metadata.lastUpdated` (and `version` on a new file).
    fn touch(&mut self, now: i64) {
        if !self.metadata.contains_key("version") {
            self.metadata.insert("version".to_owned(), Value::from(1));
        }
        self.metadata
            .insert("lastUpdated".to_owned(), Value::from(now));
    }

    fn thread(&self, id: &str) -> Option<&StoredThread> {
        let &i = self.thread_pos.get(id)?;
        self.threads.get(i)?.1.ok()
    }

    fn thread_mut(&mut self, id: &str) -> Option<&mut StoredThread> {
        let &i = self.thread_pos.get(id)?;
        self.threads.get_mut(i)?.1.ok_mut()
    }

    fn threads(&self) -> impl Iterator<Item = &StoredThread> {
        self.threads.iter().filter_map(|(_, s)| s.ok())
    }

    /// Inserts or replaces (in place) the thread under its id.
    fn put_thread(&mut self, t: StoredThread) {
        match self.thread_pos.get(&t.id) {
            Some(&i) => {
                if let Some(slot) = self.threads.get_mut(i) {
                    slot.1 = Slot::Ok(t);
                }
            }
            None => {
                self.thread_pos.insert(t.id.clone(), self.threads.len());
                self.threads.push((t.id.clone(), Slot::Ok(t)));
            }
        }
    }

    fn list(&self, thread_id: &str) -> Option<&TurnList> {
        let &i = self.list_pos.get(thread_id)?;
        self.turns.get(i).map(|(_, l)| l)
    }

    /// The thread's turn list, created empty if missing.
    fn list_mut(&mut self, path: &Path, thread_id: &str) -> Result<&mut Vec<Slot<StoredTurn>>> {
        let i = match self.list_pos.get(thread_id) {
            Some(&i) => i,
            None => {
                self.list_pos.insert(thread_id.to_owned(), self.turns.len());
                self.turns
                    .push((thread_id.to_owned(), TurnList::Ok(Vec::new())));
                self.turns.len() - 1
            }
        };
        match self.turns.get_mut(i).map(|(_, l)| l) {
            Some(TurnList::Ok(items)) => Ok(items),
            _ => Err(StoreError::BadJson {
                path: path.to_owned(),
                source: serde::de::Error::custom(format!(
                    "the turns of thread {thread_id} are not an array"
                )),
            }),
        }
    }

    /// Where the turn is: (list index, index in the list).
    fn find_turn(&self, turn_id: &str) -> Option<(usize, usize)> {
        let key = self.turn_list.get(turn_id)?;
        let &li = self.list_pos.get(key)?;
        let TurnList::Ok(items) = &self.turns.get(li)?.1 else {
            return None;
        };
        let ti = items
            .iter()
            .position(|s| s.ok().is_some_and(|t| t.id == turn_id))?;
        Some((li, ti))
    }

    fn turn(&self, turn_id: &str) -> Option<&StoredTurn> {
        let (li, ti) = self.find_turn(turn_id)?;
        match &self.turns.get(li)?.1 {
            TurnList::Ok(items) => items.get(ti)?.ok(),
            TurnList::Bad(_) => None,
        }
    }

    fn turn_mut(&mut self, turn_id: &str) -> Option<&mut StoredTurn> {
        let (li, ti) = self.find_turn(turn_id)?;
        match &mut self.turns.get_mut(li)?.1 {
            TurnList::Ok(items) => items.get_mut(ti)?.ok_mut(),
            TurnList::Bad(_) => None,
        }
    }

    /// The thread's turns that parse, with their calls sorted, in turn order.
    fn turns_of(&self, thread_id: &str) -> Vec<StoredTurn> {
        let mut out: Vec<StoredTurn> = match self.list(thread_id) {
            Some(TurnList::Ok(items)) => {
                items.iter().filter_map(Slot::ok).map(normalized).collect()
            }
            _ => Vec::new(),
        };
        out.sort_by(cmp_turns);
        out
    }
}

/// A turn as reads return it: `toolCalls` present and sorted by sequence.
fn normalized(t: &StoredTurn) -> StoredTurn {
    let mut t = t.clone();
    let mut calls = t.tool_calls.take().unwrap_or_default();
    calls.sort_by(cmp_calls);
    t.tool_calls = Some(calls);
    t
}

/// A thread id that can name a file in `state/threads/` (the original's per-thread files).
fn is_file_safe(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

// ---- the store -------------------------------------------------------------------------------

impl JsonThreadStore {
    /// The store over the file at `path` (`state/store.json`). Nothing is read or created until
    /// first use; a missing file is an empty store. Rewrites are fsynced.
    pub fn open(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        let mut lock_name = path.as_os_str().to_owned();
        lock_name.push(".lock");
        Self {
            lock_path: PathBuf::from(lock_name),
            path,
            sync: true,
            cache: Mutex::new(Cache::default()),
        }
    }

    /// Whether rewrites are fsynced (default `true`); without it a rewrite is still
    /// all-or-nothing for a process crash.
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The JSON file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> &Path {
        self.path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
    }

    /// Brings the cache up to date with the file. With `exclusive` (the lock is held), a file
    /// that does not parse is moved aside.
    fn refresh(&self, c: &mut Cache, exclusive: bool) -> Result<()> {
        let mut file = match fsutil::open_read(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !c.loaded || c.stamp.is_some() || c.corrupt.is_some() {
                    c.doc = Doc::default();
                }
                c.loaded = true;
                c.stamp = None;
                c.corrupt = None;
                return Ok(());
            }
            Err(e) => return Err(e).ctx("open", &self.path),
        };
        let meta = file.metadata().ctx("inspect", &self.path)?;
        let stamp = Stamp::of(&meta);
        let moving_aside = exclusive && c.corrupt.is_some();
        if c.loaded && c.stamp == Some(stamp) && !Stamp::racy(&meta) && !moving_aside {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.read_to_end(&mut bytes).ctx("read", &self.path)?;
        let hash = hash_bytes(&bytes);
        let same = c.loaded && c.stamp.is_some() && c.hash == hash;
        if !same {
            match Doc::parse(&bytes) {
                Ok(doc) => {
                    c.doc = doc;
                    c.corrupt = None;
                }
                Err(why) => {
                    tracing::warn!(path = %self.path.display(), why = %why,
                        "thread store file does not parse; reading it as empty");
                    c.doc = Doc::default();
                    c.corrupt = Some(why);
                }
            }
        }
        c.loaded = true;
        c.stamp = Some(stamp);
        c.hash = hash;
        if exclusive && c.corrupt.is_some() {
            let aside = self.path.with_file_name(format!(
                "{}.corrupt-{}",
                super::JSON_FILE,
                crate::now_ms()
            ));
            fsutil::rename(&self.path, &aside)?;
            tracing::warn!(path = %self.path.display(), moved_to = %aside.display(),
                "moved the unreadable thread store file aside");
            c.corrupt = None;
            c.stamp = None;
        }
        Ok(())
    }

    /// Runs a read against the up-to-date document.
    fn read<T>(&self, f: impl FnOnce(&Doc) -> T) -> Result<T> {
        let mut c = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        self.refresh(&mut c, false)?;
        Ok(f(&c.doc))
    }

    /// Runs a mutation under the file lock; `f` returns its value and whether it changed the
    /// document (then the file is rewritten).
    fn mutate<T>(&self, f: impl FnOnce(&mut Doc, i64) -> Result<(T, bool)>) -> Result<T> {
        let mut c = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        fsutil::create_dir_private(self.dir())?;
        let lock = fsutil::open_rw(&self.lock_path)?;
        lock.lock().ctx("lock", &self.lock_path)?;
        self.refresh(&mut c, true)?;
        let now = crate::now_ms();
        let (value, changed) = match f(&mut c.doc, now) {
            Ok(r) => r,
            Err(e) => {
                // The document may be half-changed: reload it next time.
                c.loaded = false;
                return Err(e);
            }
        };
        if !changed {
            return Ok(value);
        }
        c.doc.touch(now);
        c.doc.reindex();
        let written = serde_json::to_vec_pretty(&c.doc)
            .map_err(|source| StoreError::BadJson {
                path: self.path.clone(),
                source,
            })
            .and_then(|bytes| {
                fsutil::write_atomic(&self.path, &bytes, self.sync)?;
                let meta = std::fs::metadata(&self.path).ctx("inspect", &self.path)?;
                Ok((hash_bytes(&bytes), Stamp::of(&meta)))
            });
        match written {
            Ok((hash, stamp)) => {
                c.hash = hash;
                c.stamp = Some(stamp);
                c.loaded = true;
                Ok(value)
            }
            Err(e) => {
                c.loaded = false;
                Err(e)
            }
        }
        // `lock` is released here, after the rename.
    }
}

impl ThreadStore for JsonThreadStore {
    fn kind(&self) -> BackendKind {
        BackendKind::Json
    }

    fn create_thread(&self, thread: NewThread) -> Result<String> {
        let path = self.path.clone();
        self.mutate(|doc, now| {
            let id = unique_id("thread", now, |id| Ok(doc.thread_pos.contains_key(id)))?;
            doc.put_thread(thread.into_thread(id.clone(), now));
            doc.list_mut(&path, &id)?;
            Ok((id, true))
        })
    }

    fn get_thread(&self, id: &str) -> Result<Option<StoredThread>> {
        self.read(|doc| doc.thread(id).cloned())
    }

    fn update_thread(&self, id: &str, update: &ThreadUpdate) -> Result<bool> {
        self.mutate(|doc, now| match doc.thread_mut(id) {
            Some(t) => {
                update.apply(t, now);
                Ok((true, true))
            }
            None => Ok((false, false)),
        })
    }

    fn delete_thread(&self, id: &str) -> Result<bool> {
        let per_thread = self.dir().join("threads").join(format!("{id}.json"));
        let removed = self.mutate(|doc, _| {
            let before = (doc.threads.len(), doc.turns.len());
            doc.threads.retain(|(k, _)| k != id);
            doc.turns.retain(|(k, _)| k != id);
            let removed = before != (doc.threads.len(), doc.turns.len());
            if removed {
                doc.reindex();
            }
            Ok((removed, removed))
        })?;
        if is_file_safe(id) && fsutil::remove_file(&per_thread)? {
            return Ok(true);
        }
        Ok(removed)
    }

    fn list_threads(&self, filter: &ThreadFilter) -> Result<Vec<StoredThread>> {
        self.read(|doc| {
            let mut v: Vec<&StoredThread> = doc.threads().filter(|t| filter.admits(t)).collect();
            v.sort_by(|a, b| cmp_threads(a, b));
            let skip = filter.offset.unwrap_or(0);
            let take = filter.effective_limit().unwrap_or(usize::MAX);
            v.into_iter().skip(skip).take(take).cloned().collect()
        })
    }

    fn search_threads(&self, query: &str) -> Result<Vec<StoredThread>> {
        let q = query.to_lowercase();
        self.read(|doc| {
            let mut v: Vec<&StoredThread> =
                doc.threads().filter(|t| search_matches(t, &q)).collect();
            v.sort_by(|a, b| cmp_threads(a, b));
            v.into_iter().cloned().collect()
        })
    }

    fn create_turn(&self, turn: NewTurn) -> Result<String> {
        let path = self.path.clone();
        self.mutate(|doc, now| {
            if doc.thread(&turn.thread_id).is_none() {
                return Err(StoreError::NotFound {
                    id: turn.thread_id.clone(),
                });
            }
            let id = unique_id("turn", now, |id| Ok(doc.turn_list.contains_key(id)))?;
            let thread_id = turn.thread_id.clone();
            let list = doc.list_mut(&path, &thread_id)?;
            list.push(Slot::Ok(turn.into_turn(id.clone(), now)));
            let count = i64::try_from(list.len()).unwrap_or(i64::MAX);
            if let Some(t) = doc.thread_mut(&thread_id) {
                t.turn_count = count;
                t.last_turn_at = now;
                t.updated_at = now;
            }
            Ok((id, true))
        })
    }

    fn get_turn(&self, id: &str) -> Result<Option<StoredTurn>> {
        self.read(|doc| doc.turn(id).map(normalized))
    }

    fn get_turns_for_thread(&self, thread_id: &str) -> Result<Vec<StoredTurn>> {
        self.read(|doc| doc.turns_of(thread_id))
    }

    fn get_turn_items_view(
        &self,
        thread_id: &str,
        limit: Option<usize>,
    ) -> Result<Vec<StoredTurnItemsView>> {
        self.read(|doc| {
            doc.turns_of(thread_id)
                .iter()
                .take(limit.unwrap_or(usize::MAX))
                .map(StoredTurnItemsView::of)
                .collect()
        })
    }

    fn add_tool_call(&self, turn_id: &str, call: NewToolCall) -> Result<String> {
        self.mutate(|doc, now| {
            if doc.turn(turn_id).is_none() {
                return Err(StoreError::NotFound {
                    id: turn_id.to_owned(),
                });
            }
            let id = unique_id("tc", now, |id| Ok(doc.call_ids.contains(id)))?;
            let Some(turn) = doc.turn_mut(turn_id) else {
                return Err(StoreError::NotFound {
                    id: turn_id.to_owned(),
                });
            };
            let calls = turn.tool_calls.get_or_insert_with(Vec::new);
            let sequence = calls.iter().map(|c| c.sequence).max().unwrap_or(0) + 1;
            calls.push(call.into_call(id.clone(), sequence));
            let stored = i64::try_from(calls.len()).unwrap_or(i64::MAX);
            turn.tool_call_count = (turn.tool_call_count + 1).max(stored);
            Ok((id, true))
        })
    }

    fn put_thread(&self, thread: &StoredThread) -> Result<()> {
        let path = self.path.clone();
        self.mutate(|doc, _| {
            doc.put_thread(thread.clone());
            doc.list_mut(&path, &thread.id)?;
            Ok(((), true))
        })
    }

    fn put_turn(&self, turn: &StoredTurn) -> Result<()> {
        let path = self.path.clone();
        self.mutate(|doc, _| {
            if doc.thread(&turn.thread_id).is_none() {
                return Err(StoreError::NotFound {
                    id: turn.thread_id.clone(),
                });
            }
            let mut new = turn.clone();
            // Take the old turn out, remembering its place and its calls.
            let mut place = None;
            if let Some((li, ti)) = doc.find_turn(&turn.id)
                && let Some((key, TurnList::Ok(items))) = doc.turns.get_mut(li)
            {
                let old = items.remove(ti);
                if *key == turn.thread_id {
                    place = Some(ti);
                }
                if new.tool_calls.is_none()
                    && let Slot::Ok(old) = old
                {
                    new.tool_calls = old.tool_calls;
                }
            }
            if let Some(calls) = &turn.tool_calls {
                let calls = dedupe_calls(calls);
                // A call id is unique store-wide (as SQLite's key): take it from any other turn.
                let ids: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
                for (_, list) in &mut doc.turns {
                    let TurnList::Ok(items) = list else { continue };
                    for t in items.iter_mut().filter_map(Slot::ok_mut) {
                        if let Some(cs) = &mut t.tool_calls {
                            cs.retain(|c| !ids.contains(c.id.as_str()));
                        }
                    }
                }
                new.tool_calls = Some(calls);
            }
            let list = doc.list_mut(&path, &turn.thread_id)?;
            match place {
                Some(i) if i <= list.len() => list.insert(i, Slot::Ok(new)),
                _ => list.push(Slot::Ok(new)),
            }
            Ok(((), true))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_safe_ids() {
        assert!(is_file_safe("thread-1768470212944-7tibw"));
        for bad in ["", ".", "..", "../x", "a/b", ".hidden", "a\0b"] {
            assert!(!is_file_safe(bad), "{bad:?}");
        }
    }
}
