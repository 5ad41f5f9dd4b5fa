//! Project roots a source names only by a hash: Gemini CLI's `projectHash`, the lowercase hex
//! SHA-256 of the project root as Gemini CLI was given it (`getProjectHash(projectRoot)`, the
//! resolved working directory: no trailing slash). When `projects.json` does not resolve it,
//! the importer hashes the directories this machine is known to work in ([`KnownRoots`]):
//!
//! - the current directory and each of its parents;
//! - every `projectPath` of a session in the freecode home;
//! - the `cwd` of Claude Code's transcripts (`<config>/projects/<slug>/*.jsonl`) and of Codex's
//!   rollouts (`<codex>/sessions/**/rollout-*.jsonl[.zst]`, `archived_sessions/`).
//!
//! Reading is bounded: only the first [`HEAD_BYTES`] of a file are read (the `cwd` is in the
//! first record), at most [`FILES_PER_PROJECT`] transcripts per Claude Code project directory,
//! at most [`MAX_FILES`] files per agent, newest first. Nothing is decoded from a directory
//! name; a root is only ever a path some record names. Each root is hashed as given and without
//! a trailing slash.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use freecode_store::SessionStore;
use freecode_store::session::ListFilter;

use crate::gemini_cli::sha256_hex;

/// Bytes read from the start of a transcript or rollout to find its `cwd`.
pub const HEAD_BYTES: u64 = 64 * 1024;
/// Files read per agent, at most.
pub const MAX_FILES: usize = 2000;
/// Transcripts read per Claude Code project directory (they share their `cwd`), at most.
pub const FILES_PER_PROJECT: usize = 4;
/// How deep below a Codex home rollouts are looked for (`sessions/YYYY/MM/DD/`).
const CODEX_DEPTH: usize = 4;

/// Where to look for directories beyond `projects.json`: the front end's knowledge of the
/// machine (its working directory, the other agents' locations), read only when a hash needs
/// resolving.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectHints {
    /// The working directory of the import (it and its parents are candidates).
    pub cwd: Option<PathBuf>,
    /// Claude Code's `projects/` directories.
    pub claude_roots: Vec<PathBuf>,
    /// Codex homes (holding `sessions/` and `archived_sessions/`).
    pub codex_roots: Vec<PathBuf>,
}

impl ProjectHints {
    /// The hints of this machine: `cwd`, and the other agents' default locations by their
    /// variables (read through `var`).
    pub fn of_machine(cwd: Option<PathBuf>, var: &dyn Fn(&str) -> Option<OsString>) -> Self {
        Self {
            cwd,
            claude_roots: crate::claude_code::default_roots(var),
            codex_roots: crate::codex::default_roots(var),
        }
    }
}

/// Candidate project roots by their hash.
#[derive(Debug, Default)]
pub struct KnownRoots {
    by_hash: HashMap<String, String>,
}

impl KnownRoots {
    /// Gathers and hashes the candidates of `hints` and of `store`'s sessions.
    pub fn gather(hints: &ProjectHints, store: Option<&SessionStore>) -> Self {
        let mut roots = BTreeSet::new();
        if let Some(cwd) = &hints.cwd {
            for dir in cwd.ancestors() {
                if let Some(text) = dir.to_str() {
                    roots.insert(text.to_owned());
                }
            }
        }
        if let Some(store) = store
            && let Ok(listing) = store.list(&ListFilter {
                include_deleted: true,
                ..ListFilter::default()
            })
        {
            roots.extend(listing.sessions.into_iter().map(|m| m.project_path));
        }
        for root in &hints.claude_roots {
            roots.extend(claude_cwds(root));
        }
        for root in &hints.codex_roots {
            roots.extend(codex_cwds(root));
        }
        Self::of(roots)
    }

    /// Hashes `roots` (each as given, and without a trailing slash).
    pub fn of(roots: impl IntoIterator<Item = String>) -> Self {
        let mut by_hash = HashMap::new();
        for root in roots {
            if root.is_empty() {
                continue;
            }
            let trimmed = root.trim_end_matches('/');
            if !trimmed.is_empty() && trimmed != root {
                by_hash
                    .entry(sha256_hex(trimmed))
                    .or_insert_with(|| trimmed.to_owned());
            }
            by_hash.entry(sha256_hex(&root)).or_insert(root);
        }
        Self { by_hash }
    }

    /// The root whose hash is `hash` (lowercase hex; matched without regard to case).
    pub fn resolve(&self, hash: &str) -> Option<&str> {
        self.by_hash
            .get(&hash.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The directories known (each once; a root given with a trailing slash, also without).
    pub fn roots(&self) -> impl Iterator<Item = &str> {
        let unique: BTreeSet<&str> = self.by_hash.values().map(String::as_str).collect();
        unique.into_iter()
    }

    /// How many distinct hashes are known.
    pub fn len(&self) -> usize {
        self.by_hash.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }
}

/// The `cwd`s of Claude Code's transcripts under `projects`: per project directory, the first
/// [`FILES_PER_PROJECT`] transcripts (newest first).
fn claude_cwds(projects: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Ok(dirs) = std::fs::read_dir(projects) else {
        return out;
    };
    let mut budget = MAX_FILES;
    for dir in dirs.flatten() {
        if budget == 0 {
            break;
        }
        if !dir.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let Ok(files) = std::fs::read_dir(dir.path()) else {
            continue;
        };
        let mut files: Vec<(std::time::SystemTime, PathBuf)> = files
            .flatten()
            .filter(|f| f.file_type().is_ok_and(|t| t.is_file()))
            .filter(|f| {
                f.file_name()
                    .to_str()
                    .is_some_and(|n| n.ends_with(".jsonl"))
            })
            .map(|f| {
                let at = f
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(std::time::UNIX_EPOCH);
                (at, f.path())
            })
            .collect();
        files.sort_by(|a, b| b.cmp(a));
        for (_, file) in files.into_iter().take(FILES_PER_PROJECT.min(budget)) {
            budget -= 1;
            if let Some(cwd) = head(&file).as_deref().and_then(first_cwd) {
                out.insert(cwd);
            }
        }
    }
    out
}

/// The `cwd`s of the Codex rollouts under `codex` (a Codex home), newest first by name.
fn codex_cwds(codex: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    for top in ["sessions", "archived_sessions"] {
        rollouts(&codex.join(top), 0, &mut files);
    }
    files.sort_by(|a, b| b.file_name().cmp(&a.file_name()));
    files
        .iter()
        .take(MAX_FILES)
        .filter_map(|f| head(f).as_deref().and_then(first_cwd))
        .collect()
}

fn rollouts(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        let name = e.file_name();
        let name = name.to_str().unwrap_or_default();
        if kind.is_dir() && depth < CODEX_DEPTH {
            rollouts(&e.path(), depth + 1, out);
        } else if kind.is_file()
            && name.starts_with("rollout-")
            && (name.ends_with(".jsonl") || name.ends_with(".jsonl.zst"))
        {
            out.push(e.path());
        }
    }
}

/// The first [`HEAD_BYTES`] of `path` (decompressed, for a `.zst`); `None` when unreadable.
fn head(path: &Path) -> Option<Vec<u8>> {
    let file = std::fs::File::open(path).ok()?;
    let mut buf = Vec::new();
    if path.extension().is_some_and(|e| e == "zst") {
        zstd::stream::read::Decoder::new(file)
            .ok()?
            .take(HEAD_BYTES)
            .read_to_end(&mut buf)
            .ok()?;
    } else {
        file.take(HEAD_BYTES).read_to_end(&mut buf).ok()?;
    }
    Some(buf)
}

/// The first absolute `"cwd": "…"` value in `bytes` (JSON lines; the value parsed as a JSON
/// string, escapes and all).
fn first_cwd(bytes: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"cwd\"";
    let mut from = 0;
    while let Some(at) = memchr::memmem::find(&bytes[from..], KEY) {
        let rest = &bytes[from + at + KEY.len()..];
        from += at + KEY.len();
        let rest = rest.trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else {
            continue;
        };
        let mut values =
            serde_json::Deserializer::from_slice(rest.trim_ascii_start()).into_iter::<String>();
        if let Some(Ok(cwd)) = values.next()
            && cwd.starts_with('/')
        {
            return Some(cwd);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_cwd_is_found_in_the_first_record_escapes_and_all() {
        assert_eq!(
            first_cwd(br#"{"type":"user","cwd" : "/home/u/a \"b\"","x":1}"#).as_deref(),
            Some("/home/u/a \"b\"")
        );
        // A relative one is no root; the next is taken.
        assert_eq!(
            first_cwd(b"{\"cwd\":\"rel\"}\n{\"cwd\":\"/abs\"}").as_deref(),
            Some("/abs")
        );
        assert_eq!(first_cwd(br#"{"cwd":"/cut"#), None);
        assert_eq!(first_cwd(br#"{"cwd": 3}"#), None);
        assert_eq!(first_cwd(b""), None);
    }

    #[test]
    fn roots_are_hashed_as_given_and_without_a_trailing_slash() {
        let known = KnownRoots::of(["/home/u/p/".to_owned(), "/srv".to_owned(), String::new()]);
        assert_eq!(known.resolve(&sha256_hex("/home/u/p")), Some("/home/u/p"));
        assert_eq!(known.resolve(&sha256_hex("/home/u/p/")), Some("/home/u/p/"));
        assert_eq!(
            known.resolve(&sha256_hex("/srv").to_ascii_uppercase()),
            Some("/srv")
        );
        assert_eq!(known.resolve(&sha256_hex("/elsewhere")), None);
    }

    #[test]
    fn candidates_come_from_the_cwd_and_the_other_agents_records() {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("claude/projects");
        let slug = claude.join("-work-alpha");
        std::fs::create_dir_all(&slug).unwrap();
        std::fs::write(
            slug.join("s.jsonl"),
            "{\"type\":\"summary\"}\n{\"type\":\"user\",\"cwd\":\"/work/alpha\"}\n",
        )
        .unwrap();
        let day = dir.path().join("codex/sessions/2026/01/02");
        std::fs::create_dir_all(&day).unwrap();
        std::fs::write(
            day.join("rollout-2026-01-02T00-00-00-x.jsonl"),
            "{\"type\":\"session_meta\",\"payload\":{\"id\":\"x\",\"cwd\":\"/work/beta\"}}\n",
        )
        .unwrap();
        let zst = zstd::encode_all(
            &b"{\"type\":\"session_meta\",\"payload\":{\"cwd\":\"/work/gamma\"}}\n"[..],
            0,
        )
        .unwrap();
        std::fs::write(day.join("rollout-2026-01-01T00-00-00-y.jsonl.zst"), zst).unwrap();
        let hints = ProjectHints {
            cwd: Some(PathBuf::from("/tmp/deep/down")),
            claude_roots: vec![claude],
            codex_roots: vec![dir.path().join("codex")],
        };
        let known = KnownRoots::gather(&hints, None);
        for root in [
            "/work/alpha",
            "/work/beta",
            "/work/gamma",
            "/tmp/deep/down",
            "/tmp/deep",
            "/",
        ] {
            assert_eq!(known.resolve(&sha256_hex(root)), Some(root), "{root}");
        }
        // Never decoded from the slug.
        assert_eq!(known.resolve(&sha256_hex("-work-alpha")), None);
    }
}
