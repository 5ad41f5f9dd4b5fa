//! Text for people, one way for every front end that prints for one (the CLI's tables and
//! rows, the web viewer's pages): the terminal sanitizer, counts, durations, times and widths.
//!
//! **Terminal safety.** The one sanitizer every text that comes from a session (titles, paths,
//! messages, tool arguments and output, search snippets, trace and replay rows) goes through
//! before it reaches a terminal.
//!
//! A session can come from anywhere (an import, a shared home, a model's output), so its text is
//! untrusted. [`clean_text`] keeps newlines and tabs; [`clean_line`] makes one line. Both:
//!
//! - drop whole escape sequences: CSI (`ESC [ … final`, also the 8-bit `U+009B`), OSC (`ESC ]`
//!   … `BEL` or `ESC \`, also `U+009D` — which covers OSC-8 hyperlinks and title changes), DCS,
//!   SOS, PM and APC strings (`ESC P`/`X`/`^`/`_` and `U+0090`/`0098`/`009E`/`009F`, up to the
//!   string terminator) and two-character `ESC x` sequences;
//! - replace every other C0 control, `DEL` and C1 control (`U+0080`–`U+009F`) with `�`
//!   (`U+FFFD`), so that the reader sees something was there; a carriage return is dropped
//!   (it could overwrite the start of a line), which also turns `\r\n` endings into `\n`;
//! - drop the bidirectional overrides and isolates (`U+202A`–`U+202E`, `U+2066`–`U+2069`) that
//!   can make text read differently from what it is ("Trojan Source").
//!
//! JSON output is never sanitized: it escapes control characters itself and must carry the data
//! as it is.
//!
//! **Figures.** [`thousands`], [`plural`], [`count`] (`1.5k`), [`format_duration`] (`4.2s`,
//! `12m04s`, with the original's rounding), [`local_time`], [`relative_time`], and
//! [`truncate`] / [`shorten_middle`] measured in terminal columns ([`width`]).

use std::borrow::Cow;

const ESC: char = '\u{1b}';
const BEL: char = '\u{7}';
const REPLACEMENT: char = '\u{FFFD}';

/// Whether `c` is a bidirectional override or isolate.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` starts something [`sanitize`] must rewrite.
fn needs_work(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Skips a control string (OSC, DCS, SOS, PM, APC) up to and including its terminator: `BEL`,
/// `ESC \` or the 8-bit `U+009C`. An unterminated string runs to the end of the text.
fn skip_string(it: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = it.next() {
        match c {
            BEL | '\u{9c}' => return,
            ESC => {
                if it.peek() == Some(&'\\') {
                    it.next();
                }
                return;
            }
            _ => {}
        }
    }
}

/// Skips the rest of a CSI sequence: parameter and intermediate bytes, then one final byte.
fn skip_csi(it: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(&c) = it.peek() {
        it.next();
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
        if !('\u{20}'..='\u{3f}').contains(&c) {
            // Not part of a CSI sequence: stop here (the character is dropped with it).
            return;
        }
    }
}

fn sanitize(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(needs_work) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\n' | '\t' if keep_newlines => out.push(c),
            '\n' | '\t' => out.push(' '),
            '\r' => {}
            ESC => match it.next() {
                Some('[') => skip_csi(&mut it),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut it),
                // `ESC x`: a two-character sequence (or a lone ESC at the end).
                Some(_) | None => {}
            },
            '\u{9b}' => skip_csi(&mut it),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut it),
            c if is_bidi_control(c) => {}
            c if c.is_control() => out.push(REPLACEMENT),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` made safe for a terminal, newlines and tabs kept (message bodies, code).
pub fn clean_text(s: &str) -> Cow<'_, str> {
    sanitize(s, true)
}

/// `s` made safe for a terminal as one line: newlines and tabs become spaces (titles, paths,
/// snippets, table cells).
pub fn clean_line(s: &str) -> Cow<'_, str> {
    sanitize(s, false)
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

/// The display width of `s` in terminal columns (wide CJK and emoji count two, combining marks
/// zero).
pub fn width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// The longest prefix of `s` that fits `max` columns.
fn fit_prefix(s: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used > max {
            return &s[..i];
        }
    }
    s
}

/// The longest suffix of `s` that fits `max` columns.
fn fit_suffix(s: &str, max: usize) -> &str {
    let mut used = 0;
    for (i, c) in s.char_indices().rev() {
        used += unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used > max {
            return &s[i + c.len_utf8()..];
        }
    }
    s
}

/// One terminal-safe line ([`clean_line`](clean_line)) of at most `max`
/// columns, cut at the end with an ellipsis.
pub fn truncate(s: &str, max: usize) -> String {
    let one_line = clean_line(s);
    if width(&one_line) <= max {
        return one_line.into_owned();
    }
    let mut out = fit_prefix(&one_line, max.saturating_sub(1)).to_owned();
    out.push('…');
    out
}

/// One terminal-safe line of at most `max` columns, cut in the middle (`/home/me/…/repo`), so
/// that the end of a path — the repository's name — stays.
pub fn shorten_middle(s: &str, max: usize) -> String {
    let one_line = clean_line(s);
    if width(&one_line) <= max {
        return one_line.into_owned();
    }
    let room = max.saturating_sub(1);
    let tail = fit_suffix(&one_line, room - room / 4);
    let head = fit_prefix(&one_line, room - width(tail));
    format!("{head}…{tail}")
}

/// `n` with thousands separators: `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `n` and the noun, singular or plural: `1 event`, `2,048 events`. `plural` is the plural
/// form (`"messages"`), `singular` the one form.
pub fn plural(n: u64, singular: &str, plural: &str) -> String {
    format!(
        "{} {}",
        thousands(n),
        if n == 1 { singular } else { plural }
    )
}

/// A past time relative to `now_ms`, for tables: `just now`, `5m ago`, `3h ago`, `2d ago`;
/// past 30 days the local date (`2026-01-15`); a time in the future is its local time.
pub fn relative_time(ms: i64, now_ms: i64) -> String {
    let ago = now_ms.saturating_sub(ms);
    if ago < 0 {
        return local_time(ms);
    }
    let secs = ago / 1000;
    match secs {
        0..60 => "just now".to_owned(),
        60..3600 => format!("{}m ago", secs / 60),
        3600..86_400 => format!("{}h ago", secs / 3600),
        86_400..2_592_000 => format!("{}d ago", secs / 86_400),
        _ => local_date(ms),
    }
}

/// A ms timestamp as the local date, `2026-01-15`.
pub fn local_date(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%d")
            .to_string(),
        Err(_) => ms.to_string(),
    }
}

/// JavaScript's `Math.round` (halves round up, towards +∞).
pub fn js_round(x: f64) -> f64 {
    let f = x.floor();
    if x - f >= 0.5 { f + 1.0 } else { f }
}

/// JavaScript's `Number.prototype.toFixed(digits)`: the decimal nearest to the exact value of
/// `x`, halves rounded away from zero. (Rust's `{:.1}` rounds exact halves to even: `1.25` →
/// `1.2`, where the original prints `1.3`.)
pub fn to_fixed(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    // The exact decimal expansion of `x`: its lowest set bit can weigh 2^(biased exponent −
    // 1075), which takes that many fractional digits (at most 1074, for subnormals).
    let biased_exp = i64::try_from((x.abs().to_bits() >> 52) & 0x7ff).unwrap_or(0);
    let exact_digits = usize::try_from(1075 - biased_exp).unwrap_or(0);
    let exact = format!("{:.*}", exact_digits.max(digits + 1), x.abs());
    let (int_part, frac) = exact.split_once('.').unwrap_or((&exact, ""));
    let mut digits_kept: Vec<u8> = int_part.bytes().chain(frac.bytes().take(digits)).collect();
    if frac.as_bytes().get(digits).is_some_and(|&d| d >= b'5') {
        let mut i = digits_kept.len();
        loop {
            if i == 0 {
                digits_kept.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits_kept[i] == b'9' {
                digits_kept[i] = b'0';
            } else {
                digits_kept[i] += 1;
                break;
            }
        }
    }
    let split = digits_kept.len() - digits;
    let mut out = String::with_capacity(digits_kept.len() + 2);
    if x < 0.0 && digits_kept.iter().any(|&d| d != b'0') {
        out.push('-');
    }
    out.push_str(&String::from_utf8_lossy(&digits_kept[..split]));
    if digits > 0 {
        out.push('.');
        out.push_str(&String::from_utf8_lossy(&digits_kept[split..]));
    }
    out
}

/// A duration for humans: `820ms`, `4.2s`, `12m04s` (SPEC §13.3), with the rounding carried
/// into the next unit (SPEC §19.36): never `1000ms`, `60.0s` or `1m60s`; past an hour `2h 05m`,
/// past a day `3d 4h` (the original printed `460675m39s`).
pub fn format_duration(ms: f64) -> String {
    let whole_ms = js_round(ms);
    if whole_ms < 1000.0 {
        return format!("{}ms", whole_ms as i64);
    }
    if ms < 60_000.0 {
        let secs = to_fixed(ms / 1000.0, 1);
        // "60.0" would be a minute: fall through to the minutes form.
        if secs.parse::<f64>().is_ok_and(|s| s < 60.0) {
            return format!("{secs}s");
        }
    }
    let mut minutes = (ms / 60_000.0).floor();
    let mut seconds = js_round((ms % 60_000.0) / 1000.0);
    if seconds >= 60.0 {
        minutes += 1.0;
        seconds -= 60.0;
    }
    if minutes < 60.0 {
        return format!("{}m{:02}s", minutes as i64, seconds as i64);
    }
    // Past an hour, hours and minutes; past a day, days and hours (never `460675m39s`).
    let total_minutes = js_round(ms / 60_000.0) as i64;
    if total_minutes < 24 * 60 {
        return format!("{}h {:02}m", total_minutes / 60, total_minutes % 60);
    }
    let total_hours = js_round(ms / 3_600_000.0) as i64;
    format!("{}d {}h", total_hours / 24, total_hours % 24)
}

/// A count for humans: `48`, `1.5k`, `1.25M` (SPEC §13.3); `999950` is `1.00M`, not `1000.0k`.
pub fn count(n: u64) -> String {
    if n < 1000 {
        return n.to_string();
    }
    if n < 1_000_000 {
        let k = to_fixed(n as f64 / 1000.0, 1);
        if k != "1000.0" {
            return format!("{k}k");
        }
    }
    format!("{}M", to_fixed(n as f64 / 1_000_000.0, 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hostile inputs and what must reach the terminal.
    const CASES: &[(&str, &str)] = &[
        ("plain text", "plain text"),
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[2J\x1b[Hcleared", "cleared"),
        ("\x1b[38;2;255;0;0mtrue colour", "true colour"),
        (
            "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\ here",
            "click here",
        ),
        ("\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07", "link"),
        ("\x1b]0;new window title\x07after", "after"),
        ("\x1bPq#0;2;0;0;0\x1b\\sixel gone", "sixel gone"),
        ("\x1b_apc\x1b\\x", "x"),
        ("\x1b7saved\x1b8", "saved"),
        ("\u{9b}31mc1 csi", "c1 csi"),
        ("\u{9d}8;;http://x\u{9c}c1 osc", "c1 osc"),
        ("bell\x07 and nul\0", "bell� and nul�"),
        ("del\x7f", "del�"),
        ("c1 \u{85} next line", "c1 � next line"),
        ("safe\rEVIL", "safeEVIL"),
        ("abc\u{202E}cba\u{202C} \u{2066}iso\u{2069}", "abccba iso"),
        ("unterminated \x1b]8;;http://x never ends", "unterminated "),
        ("lone escape at the end \x1b", "lone escape at the end "),
        ("héllo wörld 日本語 🎉", "héllo wörld 日本語 🎉"),
    ];

    #[test]
    fn hostile_sequences_never_survive() {
        for (input, want) in CASES {
            let got = clean_text(input);
            assert_eq!(&got, want, "input {input:?}");
            assert!(
                !got.chars()
                    .any(|c| (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)),
                "{got:?}"
            );
        }
    }

    #[test]
    fn lines_and_text_differ_only_in_newlines_and_tabs() {
        assert_eq!(clean_text("a\nb\tc\r\n"), "a\nb\tc\n");
        assert_eq!(clean_line("a\nb\tc\r\n"), "a b c ");
    }

    #[test]
    fn clean_input_is_borrowed() {
        assert!(matches!(clean_line("nothing to do"), Cow::Borrowed(_)));
    }

    #[test]
    fn long_paths_keep_their_end() {
        let p = "/home/someone/work/clients/acme/projects/freecode-session-store";
        let s = shorten_middle(p, 30);
        assert!(width(&s) <= 30, "{s}");
        assert!(s.ends_with("freecode-session-store"), "{s}");
        assert!(s.starts_with("/home/"), "{s}");
        assert_eq!(shorten_middle("/short", 30), "/short");
    }

    #[test]
    fn counts_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(800_008), "800,008");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(plural(1, "event", "events"), "1 event");
        assert_eq!(plural(0, "event", "events"), "0 events");
        assert_eq!(plural(2048, "turn", "turns"), "2,048 turns");
    }

    #[test]
    fn relative_times() {
        let now = 1_800_000_000_000;
        assert_eq!(relative_time(now - 5_000, now), "just now");
        assert_eq!(relative_time(now - 5 * 60_000, now), "5m ago");
        assert_eq!(relative_time(now - 3 * 3_600_000, now), "3h ago");
        assert_eq!(relative_time(now - 2 * 86_400_000, now), "2d ago");
        assert_eq!(
            relative_time(now - 40 * 86_400_000, now),
            local_date(now - 40 * 86_400_000)
        );
    }

    #[test]
    fn to_fixed_is_javascripts() {
        assert_eq!(to_fixed(0.25, 1), "0.3"); // exact half: up (Rust's `{:.1}` gives 0.2)
        assert_eq!(to_fixed(9.95, 1), "9.9"); // 9.9499999… as a double
        assert_eq!(to_fixed(1.005, 2), "1.00");
        assert_eq!(to_fixed(99.96, 1), "100.0");
        assert_eq!(to_fixed(-1.25, 1), "-1.3");
        assert_eq!(to_fixed(1e-7, 3), "0.000");
        assert_eq!(to_fixed(5e-324, 0), "0");
    }
}
