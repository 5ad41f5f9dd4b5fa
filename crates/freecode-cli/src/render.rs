//! Output helpers: data to stdout (pretty JSON, lines), colour decisions, local and relative
//! times, tables measured in columns, counts, hints.
//!
//! One rule for time: human output shows local time (or a relative one in tables), `--json`
//! carries ms timestamps and ISO 8601 UTC strings.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

pub use freecode_ops::human::{
    local_time, plural, relative_time, shorten_middle, thousands, truncate, width,
};

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

    /// Bold yellow (search matches).
    pub fn highlight(self, s: &str) -> String {
        self.wrap("1;33", s)
    }

    /// Cyan (model rows).
    pub fn cyan(self, s: &str) -> String {
        self.wrap("36", s)
    }
}

/// A rendered line (our own SGR colour codes allowed, nothing else: the text in it is already
/// terminal-safe) cut to `max` columns with an ellipsis, so that it never wraps; colour is
/// reset after a cut. A line that fits is returned as it is.
pub fn fit_line(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let mut visible = 0;
    let mut it = s.char_indices().peekable();
    let mut coloured = false;
    // Where the text may be cut (byte offset) so that the ellipsis still fits.
    let mut cut = None;
    while let Some((i, c)) = it.next() {
        if c == '\x1b' && it.peek().is_some_and(|&(_, n)| n == '[') {
            coloured = true;
            for (_, c) in it.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if visible + w > max.saturating_sub(1) && cut.is_none() {
            cut = Some(i);
        }
        visible += w;
        if visible > max {
            let at = cut.unwrap_or(i);
            let reset = if coloured { "\x1b[0m" } else { "" };
            return format!("{}…{reset}", &s[..at]).into();
        }
    }
    s.into()
}

/// Each line of `text` fitted to the terminal's width ([`fit_line`]) when stdout is a terminal
/// (or `COLUMNS` is set); otherwise `text` as it is.
pub fn fit_to_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    fit_to(text, terminal_columns())
}

/// Each line of `text` fitted to `columns` ([`fit_line`]); `text` as it is for `None`.
pub fn fit_to(text: &str, columns: Option<usize>) -> std::borrow::Cow<'_, str> {
    match columns {
        Some(cols) => text
            .split('\n')
            .map(|l| fit_line(l, cols))
            .collect::<Vec<_>>()
            .join("\n")
            .into(),
        None => text.into(),
    }
}

/// Pads `s` (which may hold colour escapes) to `width` columns, measuring `visible`.
pub fn pad(s: &str, visible: &str, columns: usize) -> String {
    let n = width(visible);
    format!("{s}{}", " ".repeat(columns.saturating_sub(n)))
}

/// The terminal's width in columns when stdout is one (`COLUMNS` when set wins), else `None`.
pub fn terminal_columns() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return Some(n);
    }
    terminal_size().map(|(cols, _)| cols)
}

/// Stdout's terminal size (columns, rows), if it is a terminal that knows it.
pub fn terminal_size() -> Option<(usize, usize)> {
    let out = std::io::stdout();
    if !out.is_terminal() {
        return None;
    }
    let ws = rustix::termios::tcgetwinsize(&out).ok()?;
    (ws.ws_col > 0 && ws.ws_row > 0).then_some((usize::from(ws.ws_col), usize::from(ws.ws_row)))
}

/// The shortest prefix of `id` of at least `min` characters that no other id of `known`
/// (sorted) starts with, as git abbreviates hashes; the whole id when none is shorter.
pub fn short_id<'a>(id: &'a str, known: &[String], min: usize) -> &'a str {
    // Only the sorted neighbours can share the longest prefix with `id`.
    let at = known.partition_point(|k| k.as_str() < id);
    let shared = |other: &str| {
        id.chars()
            .zip(other.chars())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let before = at.checked_sub(1).and_then(|i| known.get(i));
    let after = known[at..].iter().find(|k| k.as_str() != id);
    let need = before
        .into_iter()
        .chain(after)
        .filter(|k| k.as_str() != id)
        .map(|k| shared(k) + 1)
        .max()
        .unwrap_or(0)
        .max(min);
    match id.char_indices().nth(need) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

/// A `hint:` line for errors a user can act on.
pub fn hint_for(err: &anyhow::Error) -> Option<String> {
    use freecode_store::StoreError;
    for cause in err.chain() {
        let store = cause.downcast_ref::<StoreError>().or_else(|| {
            cause
                .downcast_ref::<freecode_ops::Error>()
                .and_then(freecode_ops::Error::store_error)
        });
        if let Some(e) = store {
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
            || cause
                .downcast_ref::<freecode_ops::Error>()
                .is_some_and(|e| e.io_error_kind() == Some(BrokenPipe))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_count_columns_not_chars() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("日本"), 4);
        assert_eq!(truncate("日本語のタイトル", 7), "日本語…");
        assert!(width(&truncate("日本語のタイトル", 7)) <= 7);
        assert_eq!(pad("日本", "日本", 6), "日本  ");
    }

    #[test]
    fn short_ids_are_unique_prefixes_of_at_least_the_minimum() {
        let known: Vec<String> = ["abcdef0123", "abcdef0199", "abcdef9", "zz"]
            .map(String::from)
            .to_vec();
        assert_eq!(short_id("abcdef0123", &known, 4), "abcdef012");
        assert_eq!(short_id("abcdef0199", &known, 4), "abcdef019");
        assert_eq!(short_id("abcdef0123", &known, 9), "abcdef012");
        assert_eq!(short_id("abcdef9", &known, 4), "abcdef9");
        assert_eq!(short_id("abcdef9", &known, 2), "abcdef9");
        assert_eq!(short_id("zz", &known, 8), "zz");
        assert_eq!(short_id("abcdef0123", &known, 20), "abcdef0123");
    }

    #[test]
    fn lines_fit_their_columns_colour_kept() {
        assert_eq!(fit_line("short", 10), "short");
        assert_eq!(fit_line("exactly10!", 10), "exactly10!");
        assert_eq!(fit_line("a bit too long", 10), "a bit too…");
        assert_eq!(fit_line("日本語のタイトル", 7), "日本語…");
        let red = "\x1b[31mred and long text\x1b[0m";
        let fitted = fit_line(red, 8);
        assert_eq!(fitted, "\x1b[31mred and…\x1b[0m");
        assert_eq!(fit_line("\x1b[2mdim\x1b[0m", 3), "\x1b[2mdim\x1b[0m");
    }
}
