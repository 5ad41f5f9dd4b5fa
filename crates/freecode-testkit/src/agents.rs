//! The real agents, from npm, for tests: where `scripts/test-deps` installed the pinned versions
//! ([`PINNED`], read from `scripts/agents.pinned`, the one place they are named), and how to run
//! each one offline against a [`crate::model_server::ModelServer`] with a home of its own.
//!
//! Without an agent installed, [`installed`] prints a notice and gives `None` (the test passes),
//! except under `CI=true`, where it panics saying what is missing. `FREECODE_AGENTS` names the
//! directory the packages are in (default `/tmp/freecode-agents`); `scripts/agents-latest`
//! installs the newest versions into another one and runs the same tests there.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The npm packages and versions the tests run, one `name@version` a line.
pub const PINNED: &str = include_str!("../../../scripts/agents.pinned");

/// The pinned version of npm package `package`, as `scripts/agents.pinned` names it.
pub fn pinned(package: &str) -> Option<&'static str> {
    PINNED
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .find_map(|l| {
            let (name, version) = l.rsplit_once('@')?;
            (name == package).then_some(version)
        })
}

/// An agent the tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// `@anthropic-ai/claude-code`: `claude`.
    ClaudeCode,
    /// `@openai/codex`: `codex`.
    Codex,
    /// `@google/gemini-cli`: `gemini`.
    GeminiCli,
    /// `opencode-ai`: `opencode`.
    Opencode,
}

impl Agent {
    /// Its npm package.
    pub fn package(self) -> &'static str {
        match self {
            Self::ClaudeCode => "@anthropic-ai/claude-code",
            Self::Codex => "@openai/codex",
            Self::GeminiCli => "@google/gemini-cli",
            Self::Opencode => "opencode-ai",
        }
    }

    /// Its command.
    pub fn command(self) -> &'static str {
        match self {
            Self::ClaudeCode => "claude",
            Self::Codex => "codex",
            Self::GeminiCli => "gemini",
            Self::Opencode => "opencode",
        }
    }
}

/// Where the agents' packages are installed.
pub fn agents_dir() -> PathBuf {
    std::env::var_os("FREECODE_AGENTS")
        .map_or_else(|| PathBuf::from("/tmp/freecode-agents"), PathBuf::from)
}

/// The installed version of `agent`'s package, from its `package.json`.
pub fn installed_version(agent: Agent) -> Option<String> {
    let manifest = agents_dir()
        .join("node_modules")
        .join(agent.package())
        .join("package.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("version")?.as_str().map(str::to_owned)
}

/// `agent`'s program, or `None` after a notice when it is not installed (a panic under
/// `CI=true`). With `FREECODE_AGENTS_LATEST` unset, the installed version must be the pinned one.
pub fn installed(agent: Agent) -> Option<PathBuf> {
    let bin = agents_dir().join("node_modules/.bin").join(agent.command());
    let version = installed_version(agent);
    let ok = bin.exists() && version.is_some();
    let what = format!("{} in {}", agent.package(), agents_dir().display());
    if !crate::prerequisite(ok, &what, "scripts/test-deps installs it") {
        return None;
    }
    if std::env::var_os("FREECODE_AGENTS_LATEST").is_none() {
        let want = pinned(agent.package());
        assert_eq!(
            version.as_deref(),
            want,
            "{} in {} is not the pinned version (scripts/agents.pinned); run scripts/test-deps",
            agent.package(),
            agents_dir().display()
        );
    }
    Some(bin)
}

/// `claude -p …` in `cwd`, with `home` as its `HOME`, talking to `base_url` (the model server's
/// [`crate::model_server::ModelServer::url`]): no telemetry, no update check, no other traffic,
/// asking nothing (`--permission-mode` and `--allowedTools` are the caller's: Claude Code
/// refuses `--dangerously-skip-permissions` to root, which a CI machine may be).
pub fn claude(bin: &Path, home: &Path, cwd: &Path, base_url: &str) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TZ", "UTC")
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-scripted-test-key")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(std::process::Stdio::null())
        .arg("-p");
    c
}

/// Writes `$HOME/.codex/config.toml` naming the model server as Codex's provider
/// (`wire_api = "responses"`, its key from `SCRIPTED_API_KEY`).
pub fn codex_config(home: &Path, openai_base: &str) {
    let dir = home.join(".codex");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.toml"),
        format!(
            "model = \"gpt-scripted\"\nmodel_provider = \"scripted\"\n\n\
             [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{openai_base}\"\n\
             wire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n"
        ),
    )
    .unwrap();
}

/// `codex exec …` in `cwd` with `home` as its `HOME` (its config from [`codex_config`]): no
/// sandbox and no approvals (the test's own directory is the workspace), no git check.
pub fn codex(bin: &Path, home: &Path, cwd: &Path) -> Command {
    let mut c = Command::new(bin);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TZ", "UTC")
        .env("SCRIPTED_API_KEY", "sk-scripted-test-key")
        .env("CODEX_DISABLE_UPDATE_CHECK", "1")
        .stdin(std::process::Stdio::null())
        .args([
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        ]);
    c
}

/// `gemini -p …` in `cwd` with `home` as its `HOME`, talking to `base_url` (the model server's
/// [`crate::model_server::ModelServer::gemini_base`]) with an API key (`settings.json` selects
/// that way in), the workspace trusted, every tool call approved (`--yolo`).
pub fn gemini(bin: &Path, home: &Path, cwd: &Path, base_url: &str) -> Command {
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        r#"{"security": {"auth": {"selectedType": "gemini-api-key"}}}"#,
    )
    .unwrap();
    let mut c = Command::new(bin);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TZ", "UTC")
        .env("GEMINI_API_KEY", "scripted-test-key")
        .env("GOOGLE_GEMINI_BASE_URL", base_url)
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .stdin(std::process::Stdio::null())
        .arg("--yolo");
    c
}

/// `opencode run --auto …` in `cwd` with `home` as its `HOME` and its XDG directories below
/// it, its provider the model server's Chat Completions (`openai_base`, through the
/// OpenAI-compatible provider package opencode loads), every permission granted.
pub fn opencode(bin: &Path, home: &Path, cwd: &Path, openai_base: &str) -> Command {
    let config = home.join(".config/opencode");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("opencode.json"),
        format!(
            r#"{{"$schema": "https://opencode.ai/config.json",
  "provider": {{"scripted": {{"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
    "options": {{"baseURL": "{openai_base}", "apiKey": "scripted-test-key"}},
    "models": {{"scripted-model": {{"name": "Scripted"}}}}}}}},
  "model": "scripted/scripted-model", "autoupdate": false, "share": "disabled"}}"#
        ),
    )
    .unwrap();
    let mut c = Command::new(bin);
    c.current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TZ", "UTC")
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .stdin(std::process::Stdio::null())
        .args(["run", "--auto"]);
    c
}
