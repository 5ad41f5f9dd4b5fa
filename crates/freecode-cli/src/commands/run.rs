//! `freecode run`: one agent turn on a prompt, against an OpenAI-compatible endpoint
//! (`--base-url` / `OPENAI_BASE_URL`, key in `OPENAI_API_KEY`) or, with no endpoint configured,
//! the scripted provider built into the binary.
//!
//! The streamed answer goes to stdout as it arrives (with `--json`: one JSON object at the end
//! instead), tool activity and a one-line summary to stderr. Ctrl+C stops the turn, saves what
//! was streamed (marked `interrupted`) and exits with status 130; a second Ctrl+C within a
//! second exits with status 1 at once — once no write is in progress. A failed model call
//! (stall, HTTP error, unreachable endpoint, malformed stream) exits with status 1.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use freecode_core::SessionId;
use freecode_store::{Home, SessionStore};

use crate::agent::{
    AgentConfig, AgentEvent, AgentLoop, InterruptFlag, Interrupts, PermissionMode, ProviderConfig,
    SessionTarget, TurnOutcome, TurnStatus,
};
use crate::render::Style;
use crate::{Interrupted, UserError};

/// Stall timeout in ms (overrides the default; `--stall-timeout` overrides it).
pub const STALL_TIMEOUT_ENV: &str = "FREECODE_STALL_TIMEOUT_MS";
/// Pause between the scripted provider's chunks, ms (default 30).
pub const SCRIPTED_DELAY_ENV: &str = "FREECODE_SCRIPTED_DELAY_MS";
/// Test hook: pause (ms) between saving an interrupted turn and marking the session.
pub const INTERRUPT_SAVE_DELAY_ENV: &str = "FREECODE_INTERRUPT_SAVE_DELAY_MS";
/// History size (estimated tokens) past which a turn starts by compacting (0: never).
pub const COMPACT_AT_ENV: &str = "FREECODE_COMPACT_AT_TOKENS";
/// The API key's variable (never a flag: command lines are visible to other users).
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Arguments of `freecode run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The prompt.
    pub prompt: String,
    /// Base URL of an OpenAI-compatible API (e.g. http://localhost:8080/v1); without one the
    /// built-in scripted provider answers. The key is read from OPENAI_API_KEY.
    #[arg(long, env = "OPENAI_BASE_URL", value_name = "URL")]
    pub base_url: Option<String>,
    /// The model [default: the session's pinned model, else the provider's]; pinned in the
    /// session's meta.
    #[arg(long, short = 'm', env = "FREECODE_MODEL", value_name = "M")]
    pub model: Option<String>,
    /// Resume this session.
    #[arg(long, short = 's', value_name = "ID", conflicts_with = "continue_")]
    pub session: Option<String>,
    /// Resume the project's most recent active or interrupted session (else start one).
    #[arg(long = "continue", short = 'c')]
    pub continue_: bool,
    /// The project directory of a new session [default: the current directory].
    #[arg(long, value_name = "PATH")]
    pub project: Option<PathBuf>,
    /// What the tools may do: read-only denies write_file.
    #[arg(long, value_enum, default_value_t = PermissionMode::ReadOnly, value_name = "MODE")]
    pub permission: PermissionMode,
    /// Seconds without a byte from the provider before a call counts as stalled [default: 60,
    /// or $FREECODE_STALL_TIMEOUT_MS ms].
    #[arg(long, value_name = "SECS")]
    pub stall_timeout: Option<f64>,
    /// The most model calls in the turn.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_iterations: u32,
    /// Compact the session before the turn once its history passes this many estimated
    /// tokens, keeping the last 2 user turns (0: never).
    #[arg(long, env = COMPACT_AT_ENV, value_name = "TOKENS",
          default_value_t = crate::agent::agent_loop::DEFAULT_COMPACT_AT_TOKENS)]
    pub compact_at: u64,
    /// Print one JSON object at the end instead of streaming the answer.
    #[arg(long)]
    pub json: bool,
}

fn env_ms(name: &str) -> anyhow::Result<Option<Duration>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            let ms: u64 = v
                .trim()
                .parse()
                .map_err(|_| UserError(format!("{name} must be a number of ms, not {v:?}")))?;
            Ok(Some(Duration::from_millis(ms)))
        }
        _ => Ok(None),
    }
}

/// The provider for `base_url` (key in `OPENAI_API_KEY`), or with none the scripted provider
/// built into the binary (`FREECODE_SCRIPTED_DELAY_MS` between chunks, default 30).
pub fn provider_config(base_url: Option<&str>) -> anyhow::Result<ProviderConfig> {
    match base_url.map(str::trim).filter(|u| !u.is_empty()) {
        Some(url) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(UserError(format!(
                    "--base-url must be an http:// or https:// URL, not {url:?}"
                ))
                .into());
            }
            Ok(ProviderConfig::OpenAi {
                base_url: url.to_owned(),
                api_key: std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty()),
            })
        }
        None => Ok(ProviderConfig::Scripted {
            chunk_delay: env_ms(SCRIPTED_DELAY_ENV)?.unwrap_or(Duration::from_millis(30)),
        }),
    }
}

/// The agent settings a host without flags (`freecode serve`) takes from the environment:
/// `OPENAI_BASE_URL`, `FREECODE_STALL_TIMEOUT_MS`, `FREECODE_COMPACT_AT_TOKENS`.
pub fn agent_config_from_env() -> anyhow::Result<AgentConfig> {
    let mut config = AgentConfig::new(provider_config(
        std::env::var("OPENAI_BASE_URL").ok().as_deref(),
    )?);
    if let Some(d) = env_ms(STALL_TIMEOUT_ENV)?.filter(|d| !d.is_zero()) {
        config.stall_timeout = d;
    }
    if let Ok(v) = std::env::var(COMPACT_AT_ENV) {
        let n: u64 = v.trim().parse().map_err(|_| {
            UserError(format!(
                "{COMPACT_AT_ENV} must be a number of tokens, not {v:?}"
            ))
        })?;
        config.compact_at_tokens = (n > 0).then_some(n);
    }
    Ok(config)
}

/// The canonical path of the project directory `given` (default: the current directory), the
/// form `run` looks sessions up by; it must be an existing directory.
pub fn project_directory(given: Option<&std::path::Path>) -> anyhow::Result<String> {
    let dir = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| UserError(format!("project directory {}: {e}", dir.display())))?;
    if !dir.is_dir() {
        return Err(UserError(format!("{} is not a directory", dir.display())).into());
    }
    Ok(dir.to_string_lossy().into_owned())
}

impl RunArgs {
    fn stall_timeout(&self) -> anyhow::Result<Duration> {
        if let Some(secs) = self.stall_timeout {
            if !(secs.is_finite() && secs > 0.0) {
                return Err(UserError("--stall-timeout must be a positive number".into()).into());
            }
            return Ok(Duration::from_secs_f64(secs));
        }
        Ok(env_ms(STALL_TIMEOUT_ENV)?
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_secs(60)))
    }

    fn provider(&self) -> anyhow::Result<ProviderConfig> {
        provider_config(self.base_url.as_deref())
    }

    fn target(&self) -> anyhow::Result<SessionTarget> {
        if let Some(id) = &self.session {
            return Ok(SessionTarget::Resume(SessionId::new(id.as_str())?));
        }
        let project = project_directory(self.project.as_deref())?;
        Ok(if self.continue_ {
            SessionTarget::Continue { project }
        } else {
            SessionTarget::New { project }
        })
    }

    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        let mut config = AgentConfig::new(self.provider()?);
        config.model = self.model.clone().filter(|m| !m.trim().is_empty());
        config.permission = self.permission;
        config.stall_timeout = self.stall_timeout()?;
        config.max_iterations = self.max_iterations.max(1);
        config.compact_at_tokens = (self.compact_at > 0).then_some(self.compact_at);
        config.interrupt_save_pause = env_ms(INTERRUPT_SAVE_DELAY_ENV)?.unwrap_or_default();
        let target = self.target()?;

        let store = SessionStore::open(home.clone())?;
        let interrupts = Interrupts::new();
        interrupts
            .install_sigint_handler()
            .context("cannot take over Ctrl+C")?;
        let json = self.json;
        let style = Style::new(crate::render::color_enabled(&std::io::stderr()));
        // While the model has not answered (its first token, or after a tool ran): a spinner on
        // a terminal's stderr, nothing otherwise.
        let spinner = crate::progress::Spinner::new();
        let waiting = spinner.clone();
        let mut agent = AgentLoop::open(&store, target, config, interrupts)?.on_event(move |e| {
            waiting.hide();
            print_event(e, json, style);
            if matches!(
                e,
                AgentEvent::ToolFinished { .. }
                    | AgentEvent::ToolDenied { .. }
                    | AgentEvent::Compacted { .. }
            ) {
                waiting.show("waiting for the model");
            }
        });
        if agent.resumed_after_interrupt() {
            eprintln!(
                "{}",
                style.dim(&format!(
                    "resuming interrupted session {}: \"Continue from where you left off.\"",
                    agent.session_id()
                ))
            );
        }
        let flag = InterruptFlag::new();
        spinner.show("waiting for the model");
        let outcome = agent.run_turn(&self.prompt, &flag);
        spinner.hide();
        let outcome = outcome?;

        let line = summary(&outcome);
        eprintln!("{}", style.dim(&line));
        if json {
            let mut out = std::io::stdout().lock();
            serde_json::to_writer_pretty(&mut out, &outcome)?;
            writeln!(out)?;
        }
        match (outcome.status, &outcome.error) {
            (TurnStatus::Interrupted, _) => Err(Interrupted.into()),
            (TurnStatus::Failed, Some(e)) => {
                Err(UserError(format!("the model call failed ({}): {}", e.kind, e.message)).into())
            }
            _ => Ok(()),
        }
    }
}

/// `session <id>: 3 tool calls (1 denied), 4 model calls, 120 in / 30 out tokens, completed`.
fn summary(outcome: &TurnOutcome) -> String {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    let mut s = format!(
        "session {}: {} tool call{}",
        outcome.session_id,
        outcome.tool_calls.len(),
        plural(outcome.tool_calls.len())
    );
    if outcome.denied() > 0 {
        s.push_str(&format!(" ({} denied)", outcome.denied()));
    }
    s.push_str(&format!(
        ", {} model call{}, {} in / {} out tokens, {}",
        outcome.model_calls,
        plural(outcome.model_calls as usize),
        outcome.input_tokens,
        outcome.output_tokens,
        match outcome.status {
            TurnStatus::Completed => "completed",
            TurnStatus::Interrupted => "interrupted",
            TurnStatus::Failed => "failed",
            TurnStatus::IterationLimit => "stopped at the iteration limit",
        }
    ));
    s
}

/// Streams text to stdout and tool activity to stderr (text only without `--json`).
fn print_event(e: &AgentEvent, json: bool, style: Style) {
    // Printing is best effort: a closed stdout must not stop the turn being saved.
    match e {
        AgentEvent::Text(t) if !json => {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(t.as_bytes()).and_then(|()| out.flush());
        }
        AgentEvent::ResponseEnd if !json => {
            let _ = writeln!(std::io::stdout().lock());
        }
        AgentEvent::Text(_) | AgentEvent::ResponseEnd => {}
        AgentEvent::ToolStarted { name, args } => {
            eprintln!("{}", style.dim(&format!("→ {name} {args}")));
        }
        AgentEvent::ToolFinished { name, failed: true } => {
            eprintln!("{}", style.yellow(&format!("✗ {name} failed")));
        }
        AgentEvent::ToolFinished { .. } => {}
        AgentEvent::Compacted {
            tokens_before,
            tokens_after,
        } => {
            eprintln!(
                "{}",
                style.dim(&format!(
                    "compacted the history: ~{tokens_before} → ~{tokens_after} tokens"
                ))
            );
        }
        AgentEvent::ToolDenied { name, reason } => {
            eprintln!("{}", style.yellow(&format!("✗ {name} denied: {reason}")));
        }
    }
}
