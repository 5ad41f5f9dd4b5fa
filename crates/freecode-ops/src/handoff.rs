//! `freecode session handoff ID --to claude-code|codex`: a session, whatever its origin (run
//! here, imported from an agent, synced from another machine), written as a native transcript
//! in the agent's home so that the agent resumes it ([`freecode_import::handback`] makes the
//! lines), and the command that resumes it.
//!
//! - **Where**: Claude Code's `$CLAUDE_CONFIG_DIR` or `$HOME/.claude`
//!   (`projects/<project>/<uuid>.jsonl`); Codex's `$CODEX_HOME` or `$HOME/.codex`
//!   (`sessions/YYYY/MM/DD/rollout-…-<uuid>.jsonl`); Gemini CLI's `$GEMINI_CLI_HOME/.gemini`
//!   or `$HOME/.gemini` (`tmp/<slug>/chats/session-…-<id8>.jsonl`, the project's slug from
//!   `projects.json`, or a new one added to it with its `.project_root`, as Gemini CLI does on a
//!   project's first use). The project is `--project DIR` or the
//!   session's own, and must be a directory here (a session synced from a machine with other
//!   paths names one with `--project`).
//! - **Never overwrite**: a new id every time; the file is new (refused if the name exists, or
//!   is a link), written atomically, 0600; directories made 0700. A link in the path to the
//!   agent's home, which the user set up, is followed.
//! - **Secrets**: the session stays on the user's machines, so it is written as it is;
//!   `redact` runs the export's redactor over it first. Read through the export's reader either
//!   way, so the latest compaction's summary comes with it (as the first turn).
//! - **Never imported back as new**: the hand-back is recorded in `state/handoffs.json`
//!   ([`freecode_import::state::HandoffMarks`]); `freecode import` of the file the agent goes on
//!   writing appends only the turns after the hand-back to the session it came from.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use freecode_core::SessionId;
use freecode_import::handback;
use freecode_import::source::Agent;
use freecode_import::state::{HandoffMark, HandoffMarks};
use freecode_store::SessionStore;
use freecode_store::share::{ExportOptions, export_bundle};

use crate::error::{Error, Result};
use crate::types::Handoff;

/// An agent a session can be handed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Claude Code.
    ClaudeCode,
    /// Codex.
    Codex,
    /// Gemini CLI.
    GeminiCli,
}

impl Target {
    /// The agents' names, as `--to` takes them.
    pub const NAMES: &[&str] = &["claude-code", "codex", "gemini-cli"];

    /// `claude-code` or `codex`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "claude-code" => Ok(Self::ClaudeCode),
            "codex" => Ok(Self::Codex),
            "gemini-cli" => Ok(Self::GeminiCli),
            other => Err(Error::Invalid(format!(
                "--to {other:?}: a session can be handed to {}",
                Self::NAMES.join(", ")
            ))),
        }
    }

    fn agent(self) -> Agent {
        match self {
            Self::ClaudeCode => Agent::ClaudeCode,
            Self::Codex => Agent::Codex,
            Self::GeminiCli => Agent::GeminiCli,
        }
    }
}

/// What to hand over, and how.
#[derive(Debug, Clone)]
pub struct HandoffRequest {
    /// The agent.
    pub to: Target,
    /// The project directory (a relative one is taken from the current directory); `None`:
    /// the session's own.
    pub project: Option<String>,
    /// Run the export's redactor first.
    pub redact: bool,
}

/// The agents' homes, as the environment names them.
#[derive(Debug, Clone)]
pub struct AgentHomes {
    /// Claude Code's (`~/.claude`).
    pub claude: Option<PathBuf>,
    /// Codex's (`~/.codex`).
    pub codex: Option<PathBuf>,
    /// Gemini CLI's (`~/.gemini`).
    pub gemini: Option<PathBuf>,
}

impl AgentHomes {
    /// From `var` (the process environment in the binary): `CLAUDE_CONFIG_DIR` or
    /// `$HOME/.claude`; `CODEX_HOME` or `$HOME/.codex`.
    pub fn from_env(var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Self {
        let home = var("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let pick = |own: &str, below: &str| {
            var(own)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(below)))
        };
        Self {
            claude: pick("CLAUDE_CONFIG_DIR", ".claude"),
            codex: pick("CODEX_HOME", ".codex"),
            gemini: var("GEMINI_CLI_HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".gemini"))
                .or_else(|| home.as_ref().map(|h| h.join(".gemini"))),
        }
    }
}

/// `s` quoted for a POSIX shell when it needs it.
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// A fresh random UUID (version 4).
fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Hands session `id` to `req.to`: writes the transcript, records the hand-back, and says how
/// to resume it.
pub fn handoff(
    store: &SessionStore,
    id: &SessionId,
    req: &HandoffRequest,
    homes: &AgentHomes,
    now: i64,
) -> Result<Handoff> {
    let bundle = export_bundle(
        store,
        id,
        &ExportOptions {
            include_rollout: false,
            include_memories: false,
            no_redact: !req.redact,
            expires_at: None,
        },
    )?;
    let project = req
        .project
        .clone()
        .unwrap_or_else(|| bundle.meta.project_path.clone());
    // A relative one is taken from the current directory, as `session move` takes it.
    let project = std::path::absolute(&project)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or(project);
    let project = freecode_core::project_key::normalize_absolute(&project).ok_or_else(|| {
        Error::Invalid(format!(
            "the project {project:?} is not an absolute path: name one with --project DIR"
        ))
    })?;
    if !Path::new(&project).is_dir() {
        return Err(Error::Invalid(format!(
            "the project directory {project} does not exist here (the session may come from \
             another machine): name the directory to resume it in with --project DIR"
        )));
    }
    let summary = bundle
        .summaries
        .iter()
        .max_by_key(|s| s.created_at)
        .map(|s| s.content.as_str());
    let new_id = new_uuid();
    let (agent_home, written, resume) = match req.to {
        Target::ClaudeCode => {
            let home = homes.claude.clone().ok_or_else(|| {
                Error::Invalid(
                    "no HOME (or CLAUDE_CONFIG_DIR) to find Claude Code's home in".into(),
                )
            })?;
            let w = handback::claude_code(
                &bundle.meta,
                &bundle.messages,
                summary,
                &project,
                &new_id,
                now,
            );
            let resume = format!("cd {} && claude --resume {new_id}", shell_quote(&project));
            (home, w, resume)
        }
        Target::Codex => {
            let home = homes.codex.clone().ok_or_else(|| {
                Error::Invalid("no HOME (or CODEX_HOME) to find Codex's home in".into())
            })?;
            let w = handback::codex(
                &bundle.meta,
                &bundle.messages,
                summary,
                &project,
                &new_id,
                now,
                &jiff::tz::TimeZone::system(),
            );
            let resume = format!("cd {} && codex resume {new_id}", shell_quote(&project));
            (home, w, resume)
        }
        Target::GeminiCli => {
            let home = homes.gemini.clone().ok_or_else(|| {
                Error::Invalid("no HOME (or GEMINI_CLI_HOME) to find Gemini CLI's home in".into())
            })?;
            let slug = gemini_slug(&home, &project)?;
            let w = handback::gemini_cli(
                &bundle.meta,
                &bundle.messages,
                summary,
                &project,
                &slug,
                &new_id,
                now,
            );
            let resume = format!("cd {} && gemini --resume {new_id}", shell_quote(&project));
            (home, w, resume)
        }
    };
    let path = agent_home.join(&written.rel_path);
    write_new(&path, &written.bytes)?;
    // What an import of the file as written gives: the hand-back's own messages, never new.
    let handed = freecode_import::read(&freecode_import::source::SourceUnit::file(
        req.to.agent(),
        &path,
    ))
    .ok()
    .and_then(|read| read.sessions.into_iter().next())
    .and_then(|mut s| {
        // Gemini CLI's chat names its project by hash only (its registry is a side file).
        s.project_path = Some(project.clone());
        freecode_import::write::plan(&s, now).ok()
    })
    .map(|p| p.written().iter().map(|m| m.id.clone()).collect())
    .unwrap_or_default();
    HandoffMarks::add(
        store.home(),
        HandoffMarks::key(req.to.agent(), &new_id),
        HandoffMark {
            session: id.to_string(),
            at: now,
            path: path.clone(),
            handed,
        },
    )?;
    Ok(Handoff {
        agent: req.to.agent().name().to_owned(),
        id: new_id,
        path,
        resume,
    })
}

/// The arguments of `session.handoff` (JSON-RPC) and `handoff_session` (MCP).
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HandoffParams {
    /// The session's id (or a unique prefix of one).
    pub session_id: String,
    /// The agent: `claude-code`, `codex` or `gemini-cli`.
    pub to: String,
    /// The directory to resume it in, absolute (default: the session's project).
    #[serde(default)]
    pub project: Option<String>,
    /// Remove credentials first, with the export's redactor (default: written as it is).
    #[serde(default)]
    pub redact: bool,
}

/// [`handoff`] for a front end without a working directory of the user's (JSON-RPC, MCP): the
/// project, when given, must be absolute; the agents' homes come from this process's
/// environment.
pub fn handoff_params(home: &freecode_store::Home, p: HandoffParams) -> Result<Handoff> {
    if p.project
        .as_deref()
        .is_some_and(|d| !Path::new(d).is_absolute())
    {
        return Err(Error::Invalid(
            "project must be an absolute directory".into(),
        ));
    }
    let store = crate::sessions::open(home)?;
    let id = crate::sessions::resolve_id(&store, &p.session_id)?;
    crate::sessions::visible(&store, &id)?;
    let req = HandoffRequest {
        to: Target::parse(&p.to)?,
        project: p.project,
        redact: p.redact,
    };
    let homes = AgentHomes::from_env(&|k| std::env::var_os(k));
    handoff(&store, &id, &req, &homes, freecode_store::now_ms())
}

/// The slug Gemini CLI files `project` under in `gemini_home`: the one `projects.json` names,
/// else a new one (the directory's name in lowercase ASCII letters, digits and `-`, made unique
/// with `-2`, `-3`…) added to `projects.json` (rewritten atomically, every other entry kept)
/// with its `tmp/<slug>/.project_root`.
fn gemini_slug(gemini_home: &Path, project: &str) -> Result<String> {
    let registry = gemini_home.join("projects.json");
    let mut doc: serde_json::Value = match std::fs::read(&registry) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            Error::Failed(format!(
                "{} does not read ({e}): not changed",
                registry.display()
            ))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({"projects": {}}),
        Err(e) => return Err(Error::Failed(format!("{}: {e}", registry.display()))),
    };
    let projects = doc
        .as_object_mut()
        .ok_or_else(|| Error::Failed(format!("{} is not an object", registry.display())))?
        .entry("projects")
        .or_insert_with(|| serde_json::json!({}));
    let map = projects.as_object_mut().ok_or_else(|| {
        Error::Failed(format!("{}: projects is not an object", registry.display()))
    })?;
    if let Some(slug) = map.get(project).and_then(serde_json::Value::as_str) {
        // The registry is another program's file: a slug is one directory name under
        // `tmp/`, or the chat would be written elsewhere.
        if !is_one_name(slug) {
            return Err(Error::Failed(format!(
                "{} files {project} under {slug:?}, which is not one directory name: nothing \
                 written (Gemini CLI writes a name such as `my-app`; fix or remove that entry)",
                registry.display()
            )));
        }
        return Ok(slug.to_owned());
    }
    let base: String = Path::new(project)
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let base = if base.trim_matches('-').is_empty() {
        "project".to_owned()
    } else {
        base
    };
    let taken: std::collections::HashSet<&str> =
        map.values().filter_map(serde_json::Value::as_str).collect();
    let slug = (1..)
        .map(|n| {
            if n == 1 {
                base.clone()
            } else {
                format!("{base}-{n}")
            }
        })
        .find(|s| !taken.contains(s.as_str()) && !gemini_home.join("tmp").join(s).exists())
        .unwrap_or(base);
    map.insert(project.to_owned(), serde_json::Value::String(slug.clone()));
    let bytes = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    let dir = gemini_home.join("tmp").join(&slug);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| Error::Failed(format!("cannot create {}: {e}", dir.display())))?;
    freecode_store::fsutil::write_atomic(&dir.join(".project_root"), project.as_bytes(), true)?;
    freecode_store::fsutil::write_atomic(&registry, &bytes, true)?;
    Ok(slug)
}

/// Whether `name` is one plain directory name: not empty, not `.` or `..`, no separator, no
/// control character.
fn is_one_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

/// Writes `bytes` as the new file `path` (0600, atomically), its missing directories 0700;
/// refused when something (a file, a link) is already there.
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(Error::Failed(format!(
            "{} exists: a hand-back never overwrites",
            path.display()
        )));
    }
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::Failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    freecode_store::fsutil::write_atomic(path, bytes, true)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gemini_slug_is_one_directory_name() {
        for ok in ["my-app", "app-2", "projet été", ".hidden"] {
            assert!(is_one_name(ok), "{ok}");
        }
        for bad in ["", ".", "..", "../../../x", "/etc", "a/b", "a\\b", "a\nb"] {
            assert!(!is_one_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn commands_quote_what_a_shell_would_split() {
        assert_eq!(shell_quote("/work/app"), "/work/app");
        assert_eq!(shell_quote("/tmp/wörk space"), "'/tmp/wörk space'");
        assert_eq!(shell_quote("/a'b"), "'/a'\\''b'");
    }

    #[test]
    fn agent_homes_follow_their_variables() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        let h = AgentHomes::from_env(&env(&[("HOME", "/h")]));
        assert_eq!(h.claude.as_deref(), Some(Path::new("/h/.claude")));
        assert_eq!(h.codex.as_deref(), Some(Path::new("/h/.codex")));
        let h = AgentHomes::from_env(&env(&[
            ("HOME", "/h"),
            ("CODEX_HOME", "/c"),
            ("CLAUDE_CONFIG_DIR", "/cc"),
        ]));
        assert_eq!(h.claude.as_deref(), Some(Path::new("/cc")));
        assert_eq!(h.codex.as_deref(), Some(Path::new("/c")));
        assert!(Target::parse("opencode").is_err() && Target::parse("gemini-cli").is_ok());
    }
}
