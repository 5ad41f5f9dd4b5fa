//! Output helpers: data to stdout (pretty JSON, lines), colour decisions, local times, tables,
//! hints.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use crate::cli::ColorChoice;

/// The process-wide `--color` choice and `-q`, set once in `main` before anything prints.
static GLOBAL: OnceLock<(ColorChoice, bool)> = OnceLock::new();

/// Records the global flags (`--color`, `-q`); only the first call counts.
pub fn set_global(color: ColorChoice, quiet: bool) {
    let _ = GLOBAL.set((color, quiet));
}

/// Whether `-q` was given: notes that are not data are left out.
pub fn quiet() -> bool {
    GLOBAL.get().is_some_and(|&(_, q)| q)
}

/// Whether an environment variable is set to something other than empty (or, for the force
/// switches, `0`).
fn env_on(name: &str, zero_is_off: bool) -> bool {
    std::env::var_os(name).is_some_and(|v| !(v.is_empty() || (zero_is_off && v == "0")))
}

/// Whether to colour output written to `stream`. `--color always`/`never` decide; under `auto`
/// (the default) a non-empty `NO_COLOR` turns colour off, then `CLICOLOR_FORCE` or
/// `FORCE_COLOR` (set, not `0`) turn it on even into a pipe, else only a terminal gets it.
pub fn color_enabled(stream: &impl IsTerminal) -> bool {
    match GLOBAL.get().map_or(ColorChoice::Auto, |&(c, _)| c) {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if env_on("NO_COLOR", false) {
                false
            } else if env_on("CLICOLOR_FORCE", true) || env_on("FORCE_COLOR", true) {
                true
            } else {
                stream.is_terminal()
            }
        }
    }
}

/// ANSI styles for one output stream, on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    on: bool,
}

impl Style {
    /// Colours on (`true`) or plain text.
    pub fn new(on: bool) -> Self {
        Self { on }
    }

    /// Styles for stdout, as [`color_enabled`] decides.
    pub fn stdout() -> Self {
        Self::new(color_enabled(&std::io::stdout()))
    }

    /// Whether colour is on.
    pub fn enabled(self) -> bool {
        self.on
    }

    fn wrap(self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    /// Yellow (ids).
    pub fn id(self, s: &str) -> String {
        self.wrap("33", s)
    }

    /// Dim (secondary text).
    pub fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }

    /// Bold (headers).
    pub fn bold(self, s: &str) -> String {
        self.wrap("1", s)
    }

    /// Red (warnings in data, e.g. interrupted; hangs).
    pub fn red(self, s: &str) -> String {
        self.wrap("31", s)
    }

    /// Green.
    pub fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }

    /// Yellow (slow or failed calls).
    pub fn yellow(self, s: &str) -> String {
        self.wrap("33", s)
    }

    /// Cyan (model rows).
    pub fn cyan(self, s: &str) -> String {
        self.wrap("36", s)
    }
}

/// A ms timestamp as local date and time, `2026-01-15 09:43`.
pub fn local_time(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d %H:%M")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

/// Truncates to `max` characters with an ellipsis.
pub fn truncate(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Pads `s` (which may hold colour escapes) to `width` visible characters.
pub fn pad(s: &str, visible: &str, width: usize) -> String {
    let n = visible.chars().count();
    format!("{s}{}", " ".repeat(width.saturating_sub(n)))
}

/// A `hint:` line for errors a user can act on.
pub fn hint_for(err: &anyhow::Error) -> Option<String> {
    use freecode_store::StoreError;
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<StoreError>() {
            return match e {
                StoreError::NotFound { .. } => Some(
                    "`freecode session list --all` shows every session, deleted ones included"
                        .into(),
                ),
                StoreError::Locked { .. } => Some(
                    "another freecode process is writing this session; wait for it or stop it"
                        .into(),
                ),
                _ => None,
            };
        }
    }
    None
}

/// Prints `value` to stdout as pretty JSON and a newline (what `--json` prints), buffered:
/// stdout is line-buffered, and a large answer has millions of lines.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 << 10, std::io::stdout().lock());
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// Prints one line of data to stdout.
pub fn print_line(s: &str) -> anyhow::Result<()> {
    writeln!(std::io::stdout().lock(), "{s}")?;
    Ok(())
}

/// Whether `err` is a write to a closed stdout (the reader of a pipe went away, as with
/// `| head -1`) anywhere in its chain: the command ends quietly with status 0.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    use std::io::ErrorKind::BrokenPipe;
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(BrokenPipe))
            || matches!(
                cause.downcast_ref::<freecode_store::StoreError>(),
                Some(freecode_store::StoreError::Io { source, .. }) if source.kind() == BrokenPipe
            )
    })
}
