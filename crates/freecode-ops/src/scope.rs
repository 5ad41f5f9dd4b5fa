//! What a request is scoped by, parsed once for every front end: a project directory and the
//! ones below it ([`project_scope`]), a time (`--since`, [`parse_since`]) and a duration the user
//! types (`--expires 7d`, the server's timeouts, the relative form of `--since 3d`:
//! [`parse_duration`]).

use std::time::Duration;

use crate::error::{Error, Result};

/// The units, longest name first where one is a prefix of another (`ms` before `m`).
const UNITS: [(&str, u64); 6] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
    ("w", 604_800_000),
];

/// A whole number and a unit (`500ms`, `10s`, `2m`, `12h`, `7d`, `1w`; blanks around it
/// ignored). A bare number is in `bare` (`"s"` for timeouts), or refused when `bare` is `None`.
/// Zero is allowed (callers that need more say so); a value past `u64` milliseconds is an
/// error, never an overflow.
pub fn parse_duration(s: &str, bare: Option<&str>) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let names = || UNITS.iter().map(|(u, _)| *u).collect::<Vec<_>>().join(", ");
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 500ms, 10s, 2m, 12h or 7d"))?;
    let unit = match (unit, bare) {
        ("", Some(b)) => b,
        ("", None) => return Err(format!("{s:?} needs a unit: {} (e.g. 7d)", names())),
        (u, _) => u,
    };
    let Some(&(_, ms_per)) = UNITS.iter().find(|(u, _)| *u == unit) else {
        return Err(format!("unknown unit {unit:?}: use {}", names()));
    };
    let ms = n
        .checked_mul(ms_per)
        .ok_or_else(|| format!("{s:?} is too long"))?;
    Ok(Duration::from_millis(ms))
}

/// `--project P` as the readers take it: relative paths are made absolute from the current
/// directory (without resolving links, as the session's own `projectPath` was recorded); paths
/// that are absolute here or in the original's Windows form (`C:\…`, `\\…`) are kept. The
/// readers then match P or a directory below it by whole components
/// ([`freecode_core::project_key::within_project`]).
pub fn project_scope(p: &str) -> Result<String> {
    if p.is_empty() {
        return Err(Error::Invalid("--project: give a directory".into()));
    }
    let bytes = p.as_bytes();
    let windows = p.starts_with('\\')
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':');
    if p.starts_with('/') || windows {
        return Ok(p.to_owned());
    }
    let abs = std::path::absolute(p).map_err(|e| Error::Io {
        context: format!("--project {p}"),
        source: e,
    })?;
    abs.into_os_string()
        .into_string()
        .map_err(|_| Error::Invalid(format!("--project {p}: the path is not UTF-8")))
}

/// Parses `--since` (one parser for every command that takes it): a date (local midnight),
/// an RFC 3339 time, `today` or `yesterday` (local midnight), or a span ago (`1w`, `3d`, `12h`,
/// `30m`, `10s`). A time in the future is a user error: it could only match nothing.
pub fn parse_since(s: &str, now_ms: i64) -> Result<i64> {
    let t = instant_ms("--since", s.trim(), now_ms, Day::Start)?;
    if t > now_ms {
        return Err(Error::Invalid(format!(
            "--since {s:?} is in the future: nothing could match it"
        )));
    }
    Ok(t)
}

/// Parses `--until` (the end, not included, of a time filter), in the words `--since` takes:
/// a date or `today` / `yesterday` counts the whole day (until the next local midnight), an
/// RFC 3339 time is that instant, a span is that long ago.
pub fn parse_until(s: &str, now_ms: i64) -> Result<i64> {
    instant_ms("--until", s.trim(), now_ms, Day::End)
}

/// Which end of a day a date names.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Day {
    Start,
    End,
}

fn instant_ms(flag: &str, s: &str, now_ms: i64, day: Day) -> Result<i64> {
    // A date past what a timestamp holds (9999-12-31 in a zone east of UTC) is as much in the
    // future as any.
    let midnight = |date: jiff::civil::Date| -> Result<i64> {
        let zoned = match day {
            Day::Start => Ok(date),
            Day::End => date.tomorrow(),
        }
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::system()));
        match zoned {
            Ok(zoned) => Ok(zoned.timestamp().as_millisecond()),
            Err(_) if date > jiff::civil::date(1970, 1, 1) => Ok(i64::MAX),
            Err(e) => Err(Error::Invalid(format!("{flag} {s:?}: {e}"))),
        }
    };
    let clock = |e: jiff::Error, what: &str| Error::Failed(format!("{what}: {e}"));
    let today = || -> Result<jiff::civil::Date> {
        Ok(jiff::Timestamp::from_millisecond(now_ms)
            .map_err(|e| clock(e, "the clock"))?
            .to_zoned(jiff::tz::TimeZone::system())
            .date())
    };
    match s.to_ascii_lowercase().as_str() {
        "today" => return midnight(today()?),
        "yesterday" => {
            return midnight(today()?.yesterday().map_err(|e| clock(e, "yesterday"))?);
        }
        _ => {}
    }
    if let Ok(ago) = parse_duration(s, None) {
        let ago = i64::try_from(ago.as_millis()).unwrap_or(i64::MAX);
        return Ok(now_ms.saturating_sub(ago));
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    if let Ok(date) = s.parse::<jiff::civil::Date>() {
        return midnight(date);
    }
    Err(Error::Invalid(format!(
        "{flag} {s:?}: expected a date (2026-01-15), an RFC 3339 time, today, yesterday, \
         or 1w / 3d / 12h / 30m"
    )))
}

/// The canonical path of the project directory `given` (default: the current directory), the
/// form sessions are looked up by; it must be an existing directory.
pub fn project_directory(given: Option<&std::path::Path>) -> Result<String> {
    let dir = match given {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().map_err(|source| Error::Io {
            context: "cannot read the current directory".into(),
            source,
        })?,
    };
    let dir = dir
        .canonicalize()
        .map_err(|e| Error::Invalid(format!("project directory {}: {e}", dir.display())))?;
    if !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    Ok(dir.to_string_lossy().into_owned())
}

/// The longest server timeout taken: past a day a timeout no longer bounds anything.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// A server timeout: whole seconds, or a number with a unit ([`parse_duration`]); never zero,
/// at most a day.
pub fn parse_timeout(s: &str) -> std::result::Result<Duration, String> {
    let d = parse_duration(s, Some("s"))?;
    if d.is_zero() {
        return Err("a timeout must be positive".into());
    }
    if d > MAX_TIMEOUT {
        return Err(format!(
            "{:?} is longer than a day, the longest timeout",
            s.trim()
        ));
    }
    Ok(d)
}

/// How long a share lives: a number with a unit (`30m`, `12h`, `7d`); at least a second.
pub fn parse_expiry(s: &str) -> std::result::Result<Duration, String> {
    let d = parse_duration(s, None)?;
    if d < Duration::from_secs(1) {
        return Err("a share must live at least one second".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn numbers_with_units() {
        for (text, bare, ms) in [
            ("10", Some("s"), 10_000),
            ("10s", None, 10_000),
            (" 500ms ", None, 500),
            ("2m", None, 120_000),
            ("1h", None, 3_600_000),
            ("7d", None, 7 * 86_400_000),
            ("1w", None, 604_800_000),
            ("0s", None, 0),
        ] {
            assert_eq!(
                parse_duration(text, bare),
                Ok(Duration::from_millis(ms)),
                "{text}"
            );
        }
        for (text, bare) in [
            ("10", None),
            ("", Some("s")),
            ("s", None),
            ("10x", None),
            ("1.5s", None),
            ("-1", Some("s")),
            ("99999999999999999999h", None),
            ("18446744073709551615d", None),
        ] {
            assert!(parse_duration(text, bare).is_err(), "{text}");
        }
        assert!(
            parse_duration("10", None)
                .unwrap_err()
                .contains("needs a unit")
        );
    }

    /// `--until` a date takes the whole day; a time or a span is that instant; `--since` of the
    /// same date starts the day, so `--since D --until D` is the day D.
    #[test]
    fn until_a_date_takes_the_whole_day() {
        let now = 1_800_000_000_000;
        let day = "2026-01-15".parse::<jiff::civil::Date>().unwrap();
        let tz = jiff::tz::TimeZone::system();
        let start = day
            .to_zoned(tz.clone())
            .unwrap()
            .timestamp()
            .as_millisecond();
        let next = day
            .tomorrow()
            .unwrap()
            .to_zoned(tz)
            .unwrap()
            .timestamp()
            .as_millisecond();
        assert_eq!(parse_since("2026-01-15", now).unwrap(), start);
        assert_eq!(parse_until("2026-01-15", now).unwrap(), next);
        assert_eq!(
            parse_until("2026-01-15T10:00:00Z", now).unwrap(),
            1_768_471_200_000
        );
        assert_eq!(parse_until("3d", now).unwrap(), now - 3 * 86_400_000);
        // The future is no error for an end: it leaves nothing out.
        assert!(parse_until("9999-12-31", now).unwrap() > now);
        let err = parse_until("next tuesday", now).unwrap_err().to_string();
        assert!(err.contains("--until \"next tuesday\""), "{err}");
    }

    #[test]
    fn server_timeouts_take_seconds_or_a_unit() {
        for (text, ms) in [
            ("10", 10_000),
            ("10s", 10_000),
            (" 500ms ", 500),
            ("2m", 120_000),
            ("1h", 3_600_000),
        ] {
            assert_eq!(parse_timeout(text), Ok(Duration::from_millis(ms)), "{text}");
        }
        for text in [
            "0",
            "0s",
            "",
            "s",
            "10d",
            "25h",
            "10x",
            "1.5s",
            "-1",
            "99999999999999999999h",
        ] {
            assert!(parse_timeout(text).is_err(), "{text}");
        }
    }

    #[test]
    fn expiries_need_a_unit_and_a_second() {
        assert_eq!(parse_expiry("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_expiry("30m"), Ok(Duration::from_secs(1800)));
        for text in ["7", "0s", "500ms", "1x"] {
            assert!(parse_expiry(text).is_err(), "{text}");
        }
    }
}
