//! The settings the session store and the rollout recorder share: when appends reach the disk
//! ([`Durability`]) and how the recorder records ([`RecorderConfig`]). Both `session` and
//! `rollout` import them from here, so neither imports the other for its settings (the session
//! writer still drives a [`crate::rollout::Recorder`]: that edge runs one way only).

use std::time::Duration;

use crate::lock::LockWait;

/// When appends reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// fsync after every append.
    EveryAppend,
    /// fsync when the caller ends a turn ([`crate::SessionWriter::end_turn`]) — the default.
    #[default]
    TurnBoundary,
    /// Never fsync (the original's behaviour); rewrites are still atomic against a process crash.
    Never,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "always" | "every-append" => Ok(Self::EveryAppend),
            "turn" | "turn-boundary" => Ok(Self::TurnBoundary),
            "never" => Ok(Self::Never),
            other => Err(format!(
                "unknown durability {other:?} (expected always, turn or never)"
            )),
        }
    }
}

/// Environment switch: `off`, `0`, `false` or `no` disable recording.
pub const ROLLOUT_ENV: &str = "FREECODE_ROLLOUT";

/// Recorder settings.
#[derive(Debug, Clone, Copy)]
pub struct RecorderConfig {
    /// Whether anything is written.
    pub enabled: bool,
    /// When events reach the disk: every event, turn boundaries
    /// ([`crate::rollout::Recorder::sync`]), or never.
    pub durability: Durability,
    /// Whether to wait for another recorder of the same log.
    pub lock_wait: LockWait,
    /// The clock, ms since the epoch.
    pub clock: fn() -> i64,
    /// How long an event may wait in the buffer at most ([`FLUSH_WINDOW`]; zero: every event
    /// is written before `record` returns).
    pub flush_window: Duration,
}

impl Default for RecorderConfig {
    /// Enabled unless `FREECODE_ROLLOUT` says off; turn-boundary durability.
    fn default() -> Self {
        let off = std::env::var(ROLLOUT_ENV)
            .map(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "off" | "0" | "false" | "no"
                )
            })
            .unwrap_or(false);
        Self {
            enabled: !off,
            durability: Durability::TurnBoundary,
            lock_wait: LockWait::Fail,
            clock: crate::now_ms,
            flush_window: FLUSH_WINDOW,
        }
    }
}

impl RecorderConfig {
    /// A configuration that records nothing.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }
}

/// How long an event may wait in a recorder's buffer before it is written (at most; it is
/// written sooner before a provider is called or a tool runs, at
/// [`crate::rollout::Recorder::sync`] and on drop).
pub const FLUSH_WINDOW: Duration = Duration::from_millis(50);
