//! The one parser of durations the user types: `--expires 7d`, the server's timeouts
//! (`--read-timeout 10s`), the relative form of `--since 3d`.

use std::time::Duration;

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
}
