//! What an agent is configured from when its host has no flags of its own: the provider
//! inputs (`--provider`, a base URL, `OPENAI_API_KEY`, and `current.provider`, `current.model`,
//! `baseUrl` of `config.json`), the pinning rule applied to them ([`resolve_provider`]), and the
//! environment's timeouts and thresholds ([`agent_config_from_env`], what `freecode serve`
//! runs turns with).

use std::time::Duration;

use freecode_ops::keys::lookup_str;
use freecode_ops::{Error, Result};
use freecode_store::Home;

use crate::agent_loop::AgentConfig;
use crate::provider::{ProviderInputs, Resolved};

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

/// The variable `name` as a number of ms; unset or blank: `None`.
pub fn env_ms(name: &str) -> Result<Option<Duration>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            let ms: u64 = v
                .trim()
                .parse()
                .map_err(|_| Error::Invalid(format!("{name} must be a number of ms, not {v:?}")))?;
            Ok(Some(Duration::from_millis(ms)))
        }
        _ => Ok(None),
    }
}

/// The longest stall timeout accepted: past it a duration could overflow a deadline, and no
/// provider is waited on for a week.
pub const MAX_STALL_TIMEOUT: Duration = Duration::from_secs(7 * 86_400);

/// `FREECODE_STALL_TIMEOUT_MS` when set and not zero, at most [`MAX_STALL_TIMEOUT`].
pub fn stall_timeout_from_env() -> Result<Option<Duration>> {
    match env_ms(STALL_TIMEOUT_ENV)?.filter(|d| !d.is_zero()) {
        Some(d) if d > MAX_STALL_TIMEOUT => Err(Error::Invalid(format!(
            "{STALL_TIMEOUT_ENV} must be at most {} ms (7 days)",
            MAX_STALL_TIMEOUT.as_millis()
        ))),
        d => Ok(d),
    }
}

/// What chooses the provider: `provider` (`--provider`), `base_url` (`--base-url` or
/// `OPENAI_BASE_URL`), `model` (`--model`, `FREECODE_MODEL`), `OPENAI_API_KEY`, and
/// `current.provider`, `current.model`, `baseUrl` of `config.json` (which must parse).
pub fn provider_inputs(
    home: &Home,
    provider: Option<&str>,
    base_url: Option<&str>,
    model: Option<&str>,
) -> Result<ProviderInputs> {
    let config = home.read_config()?;
    let get = |k: &str| lookup_str(&config, k);
    Ok(ProviderInputs {
        provider: provider.map(str::to_owned),
        base_url: base_url.map(str::to_owned),
        api_key: std::env::var(API_KEY_ENV).ok().filter(|k| !k.is_empty()),
        configured_provider: get("current.provider"),
        configured_model: get("current.model"),
        configured_base_url: get("baseUrl"),
        model: model.map(str::to_owned),
        chunk_delay: env_ms(SCRIPTED_DELAY_ENV)?.unwrap_or(Duration::from_millis(30)),
    })
}

/// The provider for a session pinned to `pinned` (`None` for a new one), or the reason it is
/// refused: an [`Error::Failed`] naming `session`.
pub fn resolve_provider(
    inputs: &ProviderInputs,
    pinned: Option<&str>,
    session: Option<&str>,
) -> Result<Resolved> {
    inputs.resolve(pinned).map_err(|why| {
        Error::Failed(match session {
            Some(id) => format!("cannot resume session {id}: {why}"),
            None => why,
        })
    })
}

/// The agent settings a host without flags (`freecode serve`) takes from the environment
/// (`OPENAI_BASE_URL`, `OPENAI_API_KEY`, `FREECODE_MODEL`, `FREECODE_STALL_TIMEOUT_MS`,
/// `FREECODE_COMPACT_AT_TOKENS`) and `config.json`, for a session pinned to `pinned`.
pub fn agent_config_from_env(
    home: &Home,
    pinned: Option<&str>,
    session: Option<&str>,
) -> Result<AgentConfig> {
    let inputs = provider_inputs(
        home,
        None,
        std::env::var("OPENAI_BASE_URL").ok().as_deref(),
        std::env::var("FREECODE_MODEL").ok().as_deref(),
    )?;
    let resolved = resolve_provider(&inputs, pinned, session)?;
    if let Some(notice) = resolved.notice {
        tracing::info!("{notice}");
    }
    let mut config = AgentConfig::new(resolved.config);
    if let Some(d) = stall_timeout_from_env()? {
        config.stall_timeout = d;
    }
    if let Ok(v) = std::env::var(COMPACT_AT_ENV) {
        let n: u64 = v.trim().parse().map_err(|_| {
            Error::Invalid(format!(
                "{COMPACT_AT_ENV} must be a number of tokens, not {v:?}"
            ))
        })?;
        config.compact_at_tokens = (n > 0).then_some(n);
    }
    Ok(config)
}
