//! Power loss, not only SIGKILL: the crash states a power cut could leave, built from a trace of
//! every write, fsync, rename and unlink the store made (`freecode_store::iotrace`), and checked.
//!
//! A killed process keeps the page cache, so the SIGKILL tests never exercise the fsync order.
//! Here a workload (create, appends acknowledged one by one, end of turn, compaction, fork, a
//! second project, soft delete) runs with `Durability::EveryAppend` under a trace. The trace is
//! replayed on a model file system that keeps, for every file, the bytes written and the bytes
//! fsynced, and for every directory, its entries and the entries fsynced. After each operation
//! the model yields the states a power cut could leave, in the spirit of ALICE and CrashMonkey:
//!
//! - only what was fsynced (writes after the last fsync dropped, entries not yet synced gone);
//! - everything (what a process crash leaves);
//! - each file's writes since its last fsync cut short (half of them), the rest durable;
//! - each directory's unsynced entries applied alone (a rename or create that reached the disk
//!   before its neighbours), with the data written so far;
//! - every entry change durable but no unsynced data (renames durable, writes lost).
//!
//! Each state is written out as a real home and checked: every session lists and opens for
//! writing; no acknowledged (fsynced) message is lost; a compaction has its summary and its
//! trim, or neither.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_core::message::Role;
use freecode_store::iotrace::{self, Op};
use freecode_store::rollout::RecorderConfig;
use freecode_store::{Durability, Home, ListFilter, SessionStore, StoreConfig};

use crate::support::{new_session, text_msg};

#[derive(Debug, Clone)]
enum Node {
    File {
        data: Vec<u8>,
        durable: Vec<u8>,
    },
    Dir {
        entries: BTreeMap<OsString, usize>,
        durable: BTreeMap<OsString, usize>,
    },
}

/// The model: nodes by number, 0 the root.
#[derive(Debug, Clone)]
struct Model {
    root: PathBuf,
    nodes: Vec<Node>,
}

impl Model {
    /// The tree at `root`, all of it durable (it was there before the trace).
    fn from_disk(root: &Path) -> Self {
        let mut m = Model {
            root: root.to_path_buf(),
            nodes: vec![Node::Dir {
                entries: BTreeMap::new(),
                durable: BTreeMap::new(),
            }],
        };
        m.load(0, root);
        m
    }

    fn load(&mut self, node: usize, dir: &Path) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            let id = self.nodes.len();
            if ft.is_dir() {
                self.nodes.push(Node::Dir {
                    entries: BTreeMap::new(),
                    durable: BTreeMap::new(),
                });
                self.load(id, &e.path());
            } else if ft.is_file() {
                let data = std::fs::read(e.path()).unwrap();
                self.nodes.push(Node::File {
                    durable: data.clone(),
                    data,
                });
            } else {
                continue;
            }
            if let Node::Dir { entries, durable } = &mut self.nodes[node] {
                entries.insert(e.file_name(), id);
                durable.insert(e.file_name(), id);
            }
        }
    }

    /// The parent directory's node and the last component of `path`, in the current view.
    fn parent_of(&self, path: &Path) -> (usize, OsString) {
        let rel = path.strip_prefix(&self.root).unwrap();
        let mut comps: Vec<OsString> = rel.iter().map(|c| c.to_owned()).collect();
        let name = comps.pop().unwrap();
        let mut node = 0;
        for c in comps {
            node = match &self.nodes[node] {
                Node::Dir { entries, .. } => *entries
                    .get(&c)
                    .unwrap_or_else(|| panic!("{}: no {c:?}", path.display())),
                Node::File { .. } => panic!("{}: a file on the way", path.display()),
            };
        }
        (node, name)
    }

    fn lookup(&self, path: &Path) -> usize {
        if path == self.root {
            return 0;
        }
        let (dir, name) = self.parent_of(path);
        match &self.nodes[dir] {
            Node::Dir { entries, .. } => *entries
                .get(&name)
                .unwrap_or_else(|| panic!("{}: not there", path.display())),
            Node::File { .. } => unreachable!(),
        }
    }

    fn entries_mut(&mut self, dir: usize) -> &mut BTreeMap<OsString, usize> {
        match &mut self.nodes[dir] {
            Node::Dir { entries, .. } => entries,
            Node::File { .. } => panic!("not a directory"),
        }
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Create { path } | Op::Mkdir { path } => {
                let node = if matches!(op, Op::Create { .. }) {
                    Node::File {
                        data: Vec::new(),
                        durable: Vec::new(),
                    }
                } else {
                    Node::Dir {
                        entries: BTreeMap::new(),
                        durable: BTreeMap::new(),
                    }
                };
                let id = self.nodes.len();
                self.nodes.push(node);
                let (dir, name) = self.parent_of(path);
                self.entries_mut(dir).insert(name, id);
            }
            Op::Write { path, offset, data } => {
                let id = self.lookup(path);
                if let Node::File { data: d, .. } = &mut self.nodes[id] {
                    let end = *offset as usize + data.len();
                    if d.len() < end {
                        d.resize(end, 0);
                    }
                    d[*offset as usize..end].copy_from_slice(data);
                }
            }
            Op::SetLen { path, len } => {
                let id = self.lookup(path);
                if let Node::File { data, .. } = &mut self.nodes[id] {
                    data.resize(*len as usize, 0);
                }
            }
            Op::Fsync { path } => {
                let id = self.lookup(path);
                if let Node::File { data, durable } = &mut self.nodes[id] {
                    *durable = data.clone();
                }
            }
            Op::FsyncDir { path } => {
                let id = self.lookup(path);
                if let Node::Dir { entries, durable } = &mut self.nodes[id] {
                    *durable = entries.clone();
                }
            }
            Op::Rename { from, to } => {
                let (src, sname) = self.parent_of(from);
                let id = self.entries_mut(src).remove(&sname).unwrap();
                let (dst, dname) = self.parent_of(to);
                self.entries_mut(dst).insert(dname, id);
            }
            Op::Unlink { path } | Op::Rmdir { path } => {
                let (dir, name) = self.parent_of(path);
                self.entries_mut(dir).remove(&name);
            }
            Op::Mark(_) => {}
        }
    }

    /// The directories whose entries differ from their durable entries, and the files whose
    /// data differs from their durable data.
    fn pending(&self) -> (Vec<usize>, Vec<usize>) {
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            match n {
                Node::Dir { entries, durable } if entries != durable => dirs.push(i),
                Node::File { data, durable } if data != durable => files.push(i),
                _ => {}
            }
        }
        (dirs, files)
    }

    /// Writes one crash state under `out`: each directory shows its current entries if it is
    /// in `current_dirs` (else its durable ones); each file its current data if `all_data`,
    /// else its durable data, except `torn` (durable plus half of what followed).
    fn materialize(
        &self,
        out: &Path,
        current_dirs: &BTreeSet<usize>,
        all_data: bool,
        torn: Option<usize>,
    ) {
        std::fs::create_dir_all(out).unwrap();
        self.write_dir(0, out, current_dirs, all_data, torn, &mut BTreeSet::new());
    }

    fn write_dir(
        &self,
        node: usize,
        out: &Path,
        current_dirs: &BTreeSet<usize>,
        all_data: bool,
        torn: Option<usize>,
        seen: &mut BTreeSet<usize>,
    ) {
        if !seen.insert(node) {
            return; // a directory shows up once (the old and the new name of a rename)
        }
        let Node::Dir { entries, durable } = &self.nodes[node] else {
            return;
        };
        let shown = if current_dirs.contains(&node) {
            entries
        } else {
            durable
        };
        for (name, &child) in shown {
            let path = out.join(name);
            match &self.nodes[child] {
                Node::Dir { .. } => {
                    std::fs::create_dir_all(&path).unwrap();
                    self.write_dir(child, &path, current_dirs, all_data, torn, seen);
                }
                Node::File { data, durable } => {
                    let bytes = if Some(child) == torn {
                        let extra = data.len().saturating_sub(durable.len());
                        let keep = durable.len() + extra / 2;
                        let mut b = durable.clone();
                        if data.len() >= durable.len() && data[..durable.len()] == durable[..] {
                            b = data[..keep].to_vec();
                        }
                        b
                    } else if all_data {
                        data.clone()
                    } else {
                        durable.clone()
                    };
                    std::fs::write(&path, bytes).unwrap();
                }
            }
        }
    }
}

/// An operation without its bytes, for failure messages.
fn short(op: &Op) -> String {
    match op {
        Op::Write { path, offset, data } => {
            format!(
                "write {} bytes at {offset} to {}",
                data.len(),
                path.display()
            )
        }
        other => format!("{other:?}"),
    }
}

/// What the workload acknowledged by the time of a crash.
#[derive(Debug, Default, Clone)]
struct Acked {
    /// Sessions whose creation returned, with their acknowledged message ids.
    sessions: BTreeMap<String, Vec<String>>,
    /// Sessions whose compaction returned.
    compacted: BTreeSet<String>,
}

impl Acked {
    fn note(&mut self, mark: &str) {
        let parts: Vec<&str> = mark.split(':').collect();
        match parts.as_slice() {
            ["created", id] => {
                self.sessions.entry((*id).to_owned()).or_default();
            }
            ["forked", id, from] => {
                let msgs = self.sessions.get(*from).cloned().unwrap_or_default();
                self.sessions.insert((*id).to_owned(), msgs);
            }
            ["acked", id, msg] => self
                .sessions
                .entry((*id).to_owned())
                .or_default()
                .push((*msg).to_owned()),
            ["compacted", id, dropped @ ..] => {
                self.compacted.insert((*id).to_owned());
                if let Some(v) = self.sessions.get_mut(*id) {
                    v.retain(|m| !dropped.contains(&m.as_str()));
                }
            }
            _ => {}
        }
    }
}

const SUMMARY: &str = "SUMMARY-OF-THE-FIRST-TURNS";

/// Checks one crash state; returns what is wrong.
fn check(
    root: &Path,
    acked: &Acked,
    compacting: &BTreeMap<String, Vec<String>>,
) -> Result<(), String> {
    let store = SessionStore::with_config(Home::new(root), config()).map_err(|e| e.to_string())?;
    let listing = store
        .list(&ListFilter {
            include_deleted: true,
            ..ListFilter::default()
        })
        .map_err(|e| format!("list: {e}"))?;
    if !listing.problems.is_empty() {
        return Err(format!("unreadable sessions: {:?}", listing.problems));
    }
    let listed: BTreeSet<String> = listing.sessions.iter().map(|m| m.id.clone()).collect();
    for id in acked.sessions.keys() {
        if !listed.contains(id) {
            return Err(format!("acknowledged session {id} lost"));
        }
    }
    for id in &listed {
        let sid = SessionId::new(id.as_str()).unwrap();
        // Opening the writer is what a user's next command does: it must not be bricked, and
        // it rolls a committed compaction forward.
        let writer = store
            .writer(&sid)
            .map_err(|e| format!("{id}: writer: {e}"))?;
        drop(writer);
        let log = store.messages(&sid).map_err(|e| format!("{id}: {e}"))?;
        let ids: BTreeSet<String> = log.messages.iter().map(|m| m.id.clone()).collect();
        let summary = store
            .compaction_memory(&sid)
            .map_err(|e| format!("{id}: memory: {e}"))?
            .is_some_and(|mem| mem.summaries.iter().any(|s| s.content.contains(SUMMARY)));
        let dropped = compacting.get(id);
        if let Some(want) = acked.sessions.get(id) {
            for m in want {
                // A committed compaction replaces what it drops with the summary.
                let replaced = summary && dropped.is_some_and(|d| d.contains(m));
                if !ids.contains(m) && !replaced {
                    return Err(format!("{id}: acknowledged message {m} lost"));
                }
            }
        }
        let trimmed = !ids.contains("m0");
        // The rollout log reads, and its seq numbers only go up.
        let mut last_seq = 0u64;
        let mut ordered = true;
        freecode_store::rollout::read_events(
            &freecode_store::rollout::events_path(store.home(), &sid),
            |e| {
                ordered &= e.seq > last_seq;
                last_seq = e.seq;
            },
        )
        .map_err(|e| format!("{id}: rollout: {e}"))?;
        if !ordered {
            return Err(format!("{id}: rollout seq numbers go backwards"));
        }
        if acked.compacted.contains(id) && !(summary && trimmed) {
            return Err(format!(
                "{id}: acknowledged compaction lost (summary {summary}, trim {trimmed})"
            ));
        }
        if (dropped.is_some() || acked.compacted.contains(id)) && summary != trimmed {
            return Err(format!(
                "{id}: half a compaction (summary {summary}, trim {trimmed})"
            ));
        }
    }
    Ok(())
}

fn config() -> StoreConfig {
    StoreConfig {
        durability: Durability::EveryAppend,
        // The store records `compact.occurred`: the rollout log is in the trace too.
        rollout: RecorderConfig {
            enabled: true,
            durability: Durability::EveryAppend,
            ..RecorderConfig::default()
        },
        ..crate::support::quiet()
    }
}

/// Traces are process-wide: one traced workload at a time.
static TRACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn workload(home: &Path) -> Vec<Op> {
    let store = SessionStore::with_config(Home::new(home), config()).unwrap();
    let _one = TRACING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    iotrace::start(home);
    let a = store.create(new_session("/work/p")).unwrap();
    iotrace::mark(format!("created:{a}"));
    let mut w = store.writer(&a).unwrap();
    for i in 0..6 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        w.append(&text_msg(
            &format!("m{i}"),
            role,
            &format!("message {i} ✓ ünïcode"),
        ))
        .unwrap();
        iotrace::mark(format!("acked:{a}:m{i}"));
        if i % 2 == 1 {
            w.end_turn(10).unwrap();
        }
    }
    // Keeping the last user turn drops m0..m3: from the journal's commit on, they may go.
    iotrace::mark(format!("compacting:{a}:m0:m1:m2:m3"));
    let out = w.compact(1, SUMMARY, None).unwrap();
    assert!(out.compacted && out.messages_after < out.messages_before);
    iotrace::mark(format!("compacted:{a}:m0:m1:m2:m3"));
    for i in 6..8 {
        w.append(&text_msg(&format!("m{i}"), Role::User, "after compaction"))
            .unwrap();
        iotrace::mark(format!("acked:{a}:m{i}"));
    }
    // A Ctrl+C: the streamed text marked interrupted, a rewrite of the whole log.
    w.append(&text_msg("m8", Role::Assistant, "partial answer"))
        .unwrap();
    iotrace::mark(format!("acked:{a}:m8"));
    assert!(w.mark_interrupted(Some("m8")).unwrap());
    drop(w);
    let b = store.fork(&a, None).unwrap();
    iotrace::mark(format!("forked:{b}:{a}"));
    // The second session through create_writer: one lock from creation on, the log it created.
    let mut w = store.create_writer(new_session("/other/project")).unwrap();
    let c = w.id().clone();
    iotrace::mark(format!("created:{c}"));
    w.append(&text_msg("c0", Role::User, "second project"))
        .unwrap();
    iotrace::mark(format!("acked:{c}:c0"));
    drop(w);
    store.delete(&b).unwrap();
    iotrace::mark(format!("deleted:{b}"));
    iotrace::stop()
}

#[test]
fn every_power_cut_state_opens_and_keeps_what_was_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // The home exists before the trace (as it does once freecode has run).
    std::fs::create_dir_all(home.join("sessions")).unwrap();
    SessionStore::with_config(Home::new(&home), config()).unwrap();
    let before = Model::from_disk(&home);
    let ops = workload(&home);
    let writes = ops.iter().filter(|o| !matches!(o, Op::Mark(_))).count();
    assert!(writes > 60, "the trace saw only {writes} operations");

    let mut model = Model {
        root: home.clone(),
        ..before
    };
    let mut acked = Acked::default();
    let mut compacting = BTreeMap::new();
    let mut states = 0usize;
    let mut failures = Vec::new();
    let scratch = tmp.path().join("states");
    for (k, op) in ops.iter().enumerate() {
        model.apply(op);
        if let Op::Mark(m) = op {
            acked.note(m);
            if let Some(rest) = m.strip_prefix("compacting:") {
                let mut parts = rest.split(':');
                let id = parts.next().unwrap_or_default().to_owned();
                compacting.insert(id, parts.map(str::to_owned).collect());
            }
            continue;
        }
        let (dirs, files) = model.pending();
        let all_dirs: BTreeSet<usize> = (0..model.nodes.len()).collect();
        let mut variants: Vec<(String, BTreeSet<usize>, bool, Option<usize>)> = vec![
            ("only what was fsynced".into(), BTreeSet::new(), false, None),
            (
                "everything (a process crash)".into(),
                all_dirs.clone(),
                true,
                None,
            ),
            (
                "entries durable, unsynced data lost".into(),
                all_dirs.clone(),
                false,
                None,
            ),
        ];
        for &f in &files {
            variants.push((
                format!("file node {f} cut short"),
                all_dirs.clone(),
                false,
                Some(f),
            ));
        }
        for &d in &dirs {
            variants.push((
                format!("only directory node {d}'s entries synced"),
                BTreeSet::from([d]),
                true,
                None,
            ));
        }
        for (what, cur, all_data, torn) in variants {
            let out = scratch.join(format!("s{states}"));
            model.materialize(&out, &cur, all_data, torn);
            states += 1;
            if let Err(e) = check(&out, &acked, &compacting) {
                failures.push(format!("after op {k} ({}), {what}: {e}", short(op)));
            }
            std::fs::remove_dir_all(&out).unwrap();
        }
    }
    eprintln!(
        "power loss: {writes} traced operations, {states} crash states explored, {} failed",
        failures.len()
    );
    assert!(states > 200, "only {states} crash states");
    assert!(
        failures.is_empty(),
        "{} of {states} crash states fail:\n{}",
        failures.len(),
        failures[..failures.len().min(15)].join("\n")
    );
}
