//! Where a session belongs when its source names no usable project (Gemini CLI's chats name
//! their project only by a hash; some records name none, or a relative one): found from the
//! chat's own evidence, the absolute paths its prompts, answers, tool calls and results name.
//!
//! In order, the first that answers:
//! 1. **The hash.** A directory named in the chat (a path, or one of its parents) whose
//!    SHA-256 is the source's project hash: certain, as if the source had named it.
//! 2. **A working directory the tools show.** A tool called with a relative path (`GEMINI.md`,
//!    `src/cli.py`) whose call or result names the same file by an absolute path: the
//!    directory the relative path was taken from. The one most calls agree on.
//! 3. **A project this machine knows.** Of the directories the home's sessions and the other
//!    agents' records name ([`crate::projects::KnownRoots`]), the one most of the chat's paths
//!    lie in (the deepest, on a tie).
//! 4. **The paths themselves.** The deepest directory holding four fifths of the chat's paths
//!    or more, if it is neither a system directory nor a user's home (`/home/<user>`,
//!    `/Users/<user>`, `/root`).
//!
//! 2 to 4 are guesses: the importer says so, once per file, and `session move` places a session
//! elsewhere. With no evidence the session goes under the home's project for unplaced sessions
//! ([`unplaced_project`]); it is never skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::gemini_cli::sha256_hex;
use crate::model::{Content, ImportedSession, Item};

/// Paths read from one chat, at most (a chat of a million tool calls is bounded).
const MAX_PATHS: usize = 20_000;

/// Where a session was placed, and how sure that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// A directory named in the chat whose hash is the source's project hash.
    Hash(String),
    /// A guess, with what it rests on.
    Guess {
        /// The directory.
        dir: String,
        /// What it rests on, for a person.
        why: String,
    },
    /// No evidence.
    Unplaced,
}

/// The project of sessions no evidence places: `<home>/unplaced`, a directory of the home's
/// own, so that a session continued there runs its tools nowhere near the user's code.
pub fn unplaced_project(home_root: &Path) -> String {
    home_root.join("unplaced").to_string_lossy().into_owned()
}

/// Where session `s` belongs (see the module's order). `hash` is the source's project hash,
/// if it has one; `known` the directories this machine is known to work in.
pub fn place<'a>(
    s: &ImportedSession,
    hash: Option<&str>,
    known: impl IntoIterator<Item = &'a str>,
) -> Placement {
    let evidence = Evidence::of(s);
    if let Some(hash) = hash {
        let hash = hash.to_ascii_lowercase();
        let found = evidence
            .paths
            .iter()
            .flat_map(|p| ancestors(p))
            .find(|dir| sha256_hex(dir) == hash);
        if let Some(dir) = found {
            return Placement::Hash(dir.to_owned());
        }
    }
    if let Some((dir, votes)) = most(&evidence.cwd_votes) {
        return Placement::Guess {
            why: format!(
                "{} with a relative path {} it as the working directory",
                plural(votes, "tool call", "tool calls"),
                if votes == 1 { "shows" } else { "show" }
            ),
            dir,
        };
    }
    if evidence.paths.is_empty() {
        return Placement::Unplaced;
    }
    let mut best: Option<(&str, usize)> = None;
    for root in known {
        let Some(root) = clean_dir(root) else {
            continue;
        };
        let n = evidence.paths.iter().filter(|p| under(p, root)).count();
        let better = best.is_none_or(|(b, bn)| n > bn || (n == bn && root.len() > b.len()));
        if n > 0 && better {
            best = Some((root, n));
        }
    }
    if let Some((root, n)) = best {
        return Placement::Guess {
            dir: root.to_owned(),
            why: format!(
                "{} of the {} it names {} in this machine's project {root}",
                n,
                plural(evidence.paths.len(), "path", "paths"),
                if n == 1 { "lies" } else { "lie" }
            ),
        };
    }
    // The deepest directory holding four fifths of the paths or more (a path's last part may
    // be a file: only its parents count).
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in &evidence.paths {
        for dir in ancestors(p).skip(1) {
            *counts.entry(dir).or_default() += 1;
        }
    }
    let total = evidence.paths.len();
    let deepest = counts
        .into_iter()
        .filter(|(dir, n)| n * 5 >= total * 4 && could_be_project(dir))
        .max_by_key(|(dir, _)| dir.matches('/').count());
    match deepest {
        Some((dir, n)) => Placement::Guess {
            dir: dir.to_owned(),
            why: format!(
                "{n} of the {} it names {} below it",
                plural(evidence.paths.len(), "path", "paths"),
                if n == 1 { "lies" } else { "lie" }
            ),
        },
        None => Placement::Unplaced,
    }
}

/// The entry with the most votes (the deepest directory on a tie).
fn most(votes: &BTreeMap<String, usize>) -> Option<(String, usize)> {
    votes
        .iter()
        .max_by_key(|(dir, n)| (**n, dir.len()))
        .map(|(dir, n)| (dir.clone(), *n))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The chat's absolute paths, and the working directories its tool calls show.
#[derive(Default)]
struct Evidence {
    paths: BTreeSet<String>,
    cwd_votes: BTreeMap<String, usize>,
}

impl Evidence {
    fn of(s: &ImportedSession) -> Self {
        let mut e = Self::default();
        for item in &s.items {
            match item {
                Item::User(u) => {
                    for part in &u.parts {
                        e.text(part.text_content().unwrap_or_default());
                    }
                }
                Item::Response(r) => {
                    for c in &r.content {
                        match c {
                            Content::Part(part) => e.text(part.text_content().unwrap_or_default()),
                            Content::Tool(call) => {
                                let mut strings = Vec::new();
                                strings_of(&call.args, &mut strings);
                                let mut named = BTreeSet::new();
                                for s in &strings {
                                    named.extend(absolute_paths(s));
                                }
                                if let Some(result) = &call.result {
                                    named.extend(absolute_paths(result));
                                }
                                // A relative path argument whose absolute form the call names.
                                for rel in strings.iter().filter_map(|s| relative_path(s)) {
                                    let suffix = format!("/{rel}");
                                    let cwds: BTreeSet<&str> = named
                                        .iter()
                                        .filter_map(|abs| abs.strip_suffix(suffix.as_str()))
                                        .filter_map(clean_dir)
                                        .filter(|d| could_be_project(d))
                                        .collect();
                                    for cwd in cwds {
                                        *e.cwd_votes.entry(cwd.to_owned()).or_default() += 1;
                                    }
                                }
                                for p in named {
                                    e.add(p);
                                }
                            }
                        }
                    }
                }
                Item::Compaction(c) => e.text(&c.summary),
                Item::Subagent(sub) => {
                    e.text(&sub.task);
                    if let Some(r) = &sub.result {
                        e.text(r);
                    }
                }
                Item::Error(_) | Item::TurnEnd(_) => {}
            }
        }
        e
    }

    fn text(&mut self, text: &str) {
        for p in absolute_paths(text) {
            self.add(p);
        }
    }

    fn add(&mut self, p: String) {
        if self.paths.len() < MAX_PATHS {
            self.paths.insert(p);
        }
    }
}

/// Every string inside `v`.
fn strings_of<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings_of(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_of(x, out)),
        _ => {}
    }
}

/// Whether `b` may be part of a path in running text.
fn path_byte(c: char) -> bool {
    !(c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | '<'
                | '>'
                | '|'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | ','
                | ';'
                | ':'
                | '\\'
                | '*'
                | '?'
                | '='
        ))
}

/// The absolute POSIX paths of two parts or more in `text` (URLs left out), trailing dots
/// and slashes trimmed.
fn absolute_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut prev: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let starts = c == '/' && prev.is_none_or(|p| !path_byte(p) && p != ':' && p != '/');
        prev = Some(c);
        if !starts {
            continue;
        }
        let mut end = i + 1;
        while let Some(&(j, d)) = chars.peek() {
            if !path_byte(d) {
                break;
            }
            end = j + d.len_utf8();
            prev = Some(d);
            chars.next();
        }
        let p = text[i..end].trim_end_matches(['.', '/']);
        if p.starts_with("//") || p.split('/').filter(|s| !s.is_empty()).count() < 2 {
            continue;
        }
        if p.split('/').any(|s| s == ".." || s == ".") {
            continue;
        }
        out.push(p.to_owned());
    }
    out
}

/// `s` as a relative file path a tool took (`GEMINI.md`, `src/cli.py`), if it is one: one
/// line, no spaces, no `..`, not absolute, with a file name that has an extension or a
/// directory part.
fn relative_path(s: &str) -> Option<&str> {
    let s = s.strip_prefix("./").unwrap_or(s);
    let ok = !s.is_empty()
        && s.len() < 512
        && !s.starts_with('/')
        && !s.starts_with('~')
        && s.chars().all(path_byte)
        && !s.split('/').any(|p| p.is_empty() || p == ".." || p == ".")
        && (s.contains('/')
            || s.rsplit_once('.')
                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()));
    ok.then_some(s)
}

/// `p` and each of its parents down to two parts (`/home/wei/x/y` → `/home/wei/x/y`,
/// `/home/wei/x`, `/home/wei`).
fn ancestors(p: &str) -> impl Iterator<Item = &str> {
    let mut next = Some(p);
    std::iter::from_fn(move || {
        let cur = next?;
        next = cur
            .rsplit_once('/')
            .map(|(parent, _)| parent)
            .filter(|parent| parent.matches('/').count() >= 2);
        Some(cur)
    })
}

/// Whether `p` is `dir` or below it.
fn under(p: &str, dir: &str) -> bool {
    p.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `dir` without a trailing slash, if it is absolute and not the root.
fn clean_dir(dir: &str) -> Option<&str> {
    let d = dir.trim_end_matches('/');
    (d.starts_with('/') && d.len() > 1).then_some(d)
}

/// Whether `dir` could be a project: not a system directory, not a user's home or above.
fn could_be_project(dir: &str) -> bool {
    const SYSTEM: &[&str] = &[
        "bin",
        "boot",
        "dev",
        "etc",
        "lib",
        "lib64",
        "nix",
        "opt",
        "proc",
        "run",
        "sbin",
        "snap",
        "sys",
        "usr",
        "var",
        "System",
        "Library",
        "Applications",
        "Volumes",
        "private",
    ];
    let parts: Vec<&str> = dir.split('/').filter(|s| !s.is_empty()).collect();
    match parts.as_slice() {
        [] => false,
        [top, ..] if SYSTEM.contains(top) => false,
        ["root"] => false,
        ["home" | "Users"] | ["home" | "Users", _] => false,
        [_] => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Response, ToolCall, ToolOutcome, UserTurn};
    use crate::source::Agent;
    use serde_json::json;

    fn session(calls: Vec<(Value, Option<&str>)>, prompt: &str) -> ImportedSession {
        let mut s = ImportedSession::new(Agent::GeminiCli, "s", "/x/chat.jsonl");
        s.items.push(Item::User(UserTurn {
            id: None,
            at_ms: None,
            parts: vec![freecode_core::Part::text(prompt)],
        }));
        s.items.push(Item::Response(Response {
            id: None,
            model: None,
            requested_ms: None,
            first_token_ms: None,
            completed_ms: None,
            content: calls
                .into_iter()
                .enumerate()
                .map(|(n, (args, result))| {
                    Content::Tool(ToolCall {
                        call_id: n.to_string(),
                        name: "t".into(),
                        args,
                        result: result.map(str::to_owned),
                        outcome: ToolOutcome::Ok,
                        started_ms: None,
                        finished_ms: None,
                    })
                })
                .collect(),
            usage: None,
        }));
        s
    }

    #[test]
    fn paths_are_found_in_running_text_and_urls_are_not() {
        assert_eq!(
            absolute_paths(
                "wrote /home/wei/repo/bot/GEMINI.md. See https://x.org/a/b and \"/etc/hosts\", \
                 /tmp, `/srv/ünï/code/`"
            ),
            [
                "/home/wei/repo/bot/GEMINI.md",
                "/etc/hosts",
                "/srv/ünï/code"
            ]
        );
        assert_eq!(relative_path("src/cli.py"), Some("src/cli.py"));
        assert_eq!(relative_path("./GEMINI.md"), Some("GEMINI.md"));
        for no in [
            "",
            "/abs/x.py",
            "../up.py",
            "two words.md",
            "README",
            "~/x.md",
        ] {
            assert_eq!(relative_path(no), None, "{no:?}");
        }
    }

    #[test]
    fn the_hash_decides_then_the_tools_then_known_projects_then_the_paths() {
        let root = "/home/wei/repo/discordbot";
        let s = session(
            vec![
                (
                    json!({"file_path": "GEMINI.md"}),
                    Some("Wrote /home/wei/repo/discordbot/GEMINI.md."),
                ),
                (json!({"file_path": "src/cli.py"}), Some("ok")),
            ],
            "look at /opt/other/thing.txt",
        );
        assert_eq!(
            place(&s, Some(&sha256_hex(root).to_uppercase()), []),
            Placement::Hash(root.into())
        );
        // No hash that matches: the working directory the write showed.
        let Placement::Guess { dir, why } = place(&s, Some("00"), []) else {
            panic!()
        };
        assert_eq!(dir, root);
        assert!(why.contains("1 tool call"), "{why}");
        // No such call: the known project most paths lie in, else the paths' own directory.
        let s = session(
            vec![
                (json!({"cmd": "cat /srv/app/src/a.rs /srv/app/b.rs"}), None),
                (json!({}), Some("/srv/app/src/c.rs")),
            ],
            "hi",
        );
        let guess = |known: &[&str]| match place(&s, None, known.iter().copied()) {
            Placement::Guess { dir, .. } => dir,
            other => panic!("{other:?}"),
        };
        assert_eq!(guess(&["/srv/app/", "/srv"]), "/srv/app");
        assert_eq!(guess(&["/elsewhere"]), "/srv/app");
        // A user's home and system directories are never a project; no paths: unplaced.
        let s = session(
            vec![(json!({"p": "/home/wei/a.txt /home/wei/b/c.txt"}), None)],
            "",
        );
        assert_eq!(place(&s, None, []), Placement::Unplaced);
        let s = session(
            vec![(json!({"p": "/usr/lib/x.so /usr/lib/y.so"}), None)],
            "",
        );
        assert_eq!(place(&s, None, []), Placement::Unplaced);
        assert_eq!(
            place(&session(vec![], "nothing here"), None, []),
            Placement::Unplaced
        );
    }
}
