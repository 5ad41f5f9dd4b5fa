//! Terminal safety: the one sanitizer every text that comes from a session (titles, paths,
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
}
