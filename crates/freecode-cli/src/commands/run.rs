//! `freecode run`: one agent turn on a prompt, against an OpenAI-compatible endpoint
//! (`--base-url` / `OPENAI_BASE_URL` / `baseUrl`, key in `OPENAI_API_KEY`; a key alone goes to
//! the OpenAI API's public endpoint) or the scripted provider built into the binary — when asked
//! (`--provider scripted`) or when nothing is configured, with a notice. A resumed session
//! keeps the provider and model it is pinned to, or the run is refused with the reason.
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
use freecode_store::{Home, SessionStore};

use freecode_agent::config::{
    COMPACT_AT_ENV, INTERRUPT_SAVE_DELAY_ENV, MAX_STALL_TIMEOUT, env_ms, provider_inputs,
    resolve_provider, stall_timeout_from_env,
};
use freecode_agent::{
    AgentConfig, AgentEvent, AgentLoop, InterruptFlag, Interrupts, PermissionMode, SessionTarget,
    TurnOutcome, TurnStatus,
};
use freecode_ops::scope::project_directory;
use freecode_ops::sessions::resolve_id;

use crate::render::Style;
use crate::{Interrupted, UserError};

/// The most `run -` reads from standard input.
const PROMPT_MAX_BYTES: u64 = 16 << 20;

/// Arguments of `freecode run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The prompt; `-` reads it from standard input (at most 16 MiB). An empty one is refused.
    pub prompt: String,
    /// The provider of a new session: openai (any OpenAI-compatible endpoint) or scripted
    /// (built in) [default: current.provider of config.json, else openai when a base URL or
    /// OPENAI_API_KEY is set, else scripted, with a notice]. A resumed session keeps its own.
    #[arg(long, value_name = "P")]
    pub provider: Option<String>,
    /// Base URL of an OpenAI-compatible API (e.g. http://localhost:8080/v1) [default: baseUrl
    /// of config.json; with only OPENAI_API_KEY, the OpenAI API's public endpoint].
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
    #[arg(long, value_enum, default_value_t = Permission::ReadOnly, value_name = "MODE")]
    pub permission: Permission,
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
          default_value_t = freecode_agent::agent_loop::DEFAULT_COMPACT_AT_TOKENS)]
    pub compact_at: u64,
    /// Print one JSON object at the end instead of streaming the answer.
    #[arg(long)]
    pub json: bool,
}

/// `--permission`: the agent's [`PermissionMode`], as the flag spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Permission {
    /// Read and list only: every write is denied.
    #[default]
    ReadOnly,
    /// Also write files inside the project directory.
    WorkspaceWrite,
}

impl From<Permission> for PermissionMode {
    fn from(p: Permission) -> Self {
        match p {
            Permission::ReadOnly => Self::ReadOnly,
            Permission::WorkspaceWrite => Self::WorkspaceWrite,
        }
    }
}

/// Where `run` runs: an existing session, its meta read once, or a new one in `project`.
enum Target {
    Existing(freecode_core::SessionMeta),
    New { project: String },
}

impl RunArgs {
    fn stall_timeout(&self) -> anyhow::Result<Duration> {
        if let Some(secs) = self.stall_timeout {
            if !(secs.is_finite() && secs > 0.0) {
                return Err(UserError("--stall-timeout must be a positive number".into()).into());
            }
            return Duration::try_from_secs_f64(secs)
                .ok()
                .filter(|d| *d <= MAX_STALL_TIMEOUT)
                .ok_or_else(|| {
                    UserError(format!(
                        "--stall-timeout must be at most {} seconds (7 days), not {secs}",
                        MAX_STALL_TIMEOUT.as_secs()
                    ))
                    .into()
                });
        }
        Ok(stall_timeout_from_env()?.unwrap_or(Duration::from_secs(60)))
    }

    /// The prompt argument, or standard input for `-`; empty (or only blanks) is a user error.
    fn prompt(&self) -> anyhow::Result<String> {
        let prompt = if self.prompt == "-" {
            let bytes = freecode_store::fsutil::read_capped(
                std::io::stdin().lock(),
                std::path::Path::new("-"),
                PROMPT_MAX_BYTES,
                "a prompt",
            )
            .map_err(|e| UserError(e.to_string()))?;
            String::from_utf8(bytes)
                .map_err(|_| UserError("the prompt on standard input is not UTF-8".into()))?
        } else {
            self.prompt.clone()
        };
        if prompt.trim().is_empty() {
            return Err(UserError("the prompt is empty: nothing to ask the model".into()).into());
        }
        Ok(prompt)
    }

    /// The session to run in: `--session`, the one `--continue` picks, or a new one. The
    /// meta of an existing one is read here, once, and passed down (the provider pin is
    /// decided from it, and the loop opens with it).
    fn target(&self, store: &SessionStore) -> anyhow::Result<Target> {
        if let Some(id) = &self.session {
            let id = resolve_id(store, id)?;
            return Ok(Target::Existing(store.meta(&id)?));
        }
        let project = project_directory(self.project.as_deref())?;
        if self.continue_
            && let Some(meta) = freecode_agent::agent_loop::continue_candidate(store, &project)?
        {
            return Ok(Target::Existing(meta));
        }
        Ok(Target::New { project })
    }

    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        // An empty prompt is refused before anything is opened or created.
        let prompt = self.prompt()?;
        let model = self.model.clone().filter(|m| !m.trim().is_empty());
        let inputs = provider_inputs(
            home,
            self.provider.as_deref(),
            self.base_url.as_deref(),
            model.as_deref(),
        )?;
        let store = SessionStore::open(home.clone())?;
        let (target, pinned) = match self.target(&store)? {
            Target::Existing(meta) => (SessionTarget::Known(Box::new(meta.clone())), Some(meta)),
            Target::New { project } => (SessionTarget::New { project }, None),
        };
        let resolved = resolve_provider(
            &inputs,
            pinned.as_ref().map(|m| m.provider.as_str()),
            pinned.as_ref().map(|m| m.id.as_str()),
        )?;
        let style = Style::new(crate::render::color_enabled(&std::io::stderr()));
        if let Some(notice) = &resolved.notice {
            eprintln!("{}", style.dim(notice));
        }
        let mut config = AgentConfig::new(resolved.config);
        config.model = model;
        config.permission = self.permission.into();
        config.stall_timeout = self.stall_timeout()?;
        config.max_iterations = self.max_iterations.max(1);
        config.compact_at_tokens = (self.compact_at > 0).then_some(self.compact_at);
        config.interrupt_save_pause = env_ms(INTERRUPT_SAVE_DELAY_ENV)?.unwrap_or_default();

        let interrupts = Interrupts::new();
        crate::signals::install_sigint_handler(&interrupts).context("cannot take over Ctrl+C")?;
        let json = self.json;
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
        if let Some(before) = &pinned
            && before.model.is_some()
            && before.model != agent.meta().model
        {
            // Only an explicit --model changes a pin: said once, never silently.
            eprintln!(
                "{}",
                style.dim(&format!(
                    "session {}: model {} → {} (--model)",
                    agent.session_id(),
                    before.model.as_deref().unwrap_or("-"),
                    agent
                        .meta()
                        .model
                        .as_deref()
                        .unwrap_or("the provider's default")
                ))
            );
        }
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
        let outcome = agent.run_turn(&prompt, &flag);
        spinner.hide();
        // The session's files complete and its lock free: `sync.auto` takes it from here.
        drop(agent);
        crate::autosync::after_turn(home);
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
        AgentEvent::CompactionShort {
            tokens,
            limit,
            reason,
        } => {
            eprintln!(
                "{}",
                style.yellow(&format!(
                    "the history stays above --compact-at {limit} (~{tokens} tokens): {reason}"
                ))
            );
        }
        AgentEvent::ToolDenied { name, reason } => {
            eprintln!("{}", style.yellow(&format!("✗ {name} denied: {reason}")));
        }
    }
}
