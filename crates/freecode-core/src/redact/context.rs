//! Secrets that a name beside them identifies, in the shapes a transcript holds besides
//! `key = value` (which the assignment detector reads):
//!
//! - an XML element named like a secret: `<password>…</password>`, `<ns:ClientSecret>…`;
//! - a name and a value as two literals in a row, as an environment lookup with a default or a
//!   settings call writes them: `os.getenv("API_TOKEN", "…")`, `headers.set("X-Api-Key", "…")`;
//! - a fallback after a name: `process.env.API_TOKEN || "…"`, `getenv("SECRET") or "…"`,
//!   `env::var("TOKEN").unwrap_or("…")`, `?? "…"`;
//! - a sentence that says what the secret is: `my password is Tr0ub4dor3`, `the API key was …`;
//! - the short password flag of the commands that take one: `mysql -pS3cret`, `sshpass -p …`,
//!   `docker login -u bob -p …`;
//! - a `.netrc` entry: `machine host login bob password …`.
//!
//! The name is judged as an assignment's key is ([`classify_key`]); a value next to two
//! literals, after a fallback or in prose must also look like a credential (a digit or both
//! cases, or a symbol), so `t("password", "Enter your password")` and "the token is expired"
//! stay. Each shape runs only when the anchors' pass found its literal ([`Gates`]).

use regex::Regex;

use super::detectors::{Gates, compile};
use super::keys::{Strength, classify_key};
use super::values::{Value, credential_like, has_digit, judge, parse_value};
use super::{Finding, SecretKind, push};

/// The compiled patterns.
#[derive(Debug)]
pub(super) struct Context {
    xml: Regex,
    pair: Regex,
    fallback: Regex,
    short_flag: Regex,
    netrc: Regex,
}

/// `<name>value</name>`, on one line; the closing tag is compared with the opening one.
const XML_ELEMENT: &str =
    r"<([A-Za-z_][A-Za-z0-9_.:-]{0,99})>([^<>\r\n]{1,512})</([A-Za-z_][A-Za-z0-9_.:-]{0,99})>";

/// A quoted name, a comma, and the value's opening quote: `("API_TOKEN", "…")`.
const PAIR: &str = r#"["']([A-Za-z_][A-Za-z0-9_.-]{0,99})["'][ \t]*,[ \t]*"#;

/// A name (bare, a member, or quoted in a call) and a fallback operator before a literal.
const FALLBACK: &str = concat!(
    r#"([A-Za-z_][A-Za-z0-9_]{0,99})["']?\)?[ \t]*"#,
    r"(?:\|\||\?\?|(?-u:\b)or(?-u:\b)|\.unwrap_or(?:_else)?\((?:\|\|[ \t]*)?)",
    r"[ \t]*"
);

/// The commands whose `-p` is a password, and the flag: glued (`mysql -pS3cret`) or spaced.
/// The command names come first, so the search skips to them.
const SHORT_FLAG: &str = concat!(
    r"(?-u:\b)(?:(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)(?-u:\b)[^\n;&|]*?[ \t]-p",
    r"|(?:sshpass(?-u:\b)|(?:docker|podman|nerdctl|buildah|oras)[ \t]+login(?-u:\b))",
    r"[^\n;&|]*?[ \t]-p[ \t]+)"
);

/// A `.netrc` entry (on one line or several).
const NETRC: &str = concat!(
    r"(?-u:\b)machine[ \t\r\n]+[^ \t\r\n]+[ \t\r\n]+login[ \t\r\n]+[^ \t\r\n]+",
    r"[ \t\r\n]+password[ \t\r\n]+"
);

impl Context {
    pub(super) fn new() -> Self {
        Self {
            xml: compile(XML_ELEMENT),
            pair: compile(PAIR),
            fallback: compile(FALLBACK),
            short_flag: compile(SHORT_FLAG),
            netrc: compile(NETRC),
        }
    }

    /// Every finding of the shapes `gates` lets run.
    pub(super) fn collect(&self, text: &str, gates: Gates, out: &mut Vec<Finding>) {
        if gates.has(Gates::XML_ELEMENT) {
            self.xml_elements(text, out);
        }
        if gates.has(Gates::PAIR) {
            self.pairs(text, out);
        }
        if gates.has(Gates::FALLBACK) {
            self.fallbacks(text, out);
        }
        if gates.has(Gates::PROSE) {
            self.prose(text, out);
        }
        if gates.has(Gates::SHORT_FLAG) {
            self.short_flags(text, out);
        }
        if gates.has(Gates::NETRC) {
            self.netrc(text, out);
        }
    }

    fn xml_elements(&self, text: &str, out: &mut Vec<Finding>) {
        for caps in self.xml.captures_iter(text) {
            let (Some(open), Some(body), Some(close)) = (caps.get(1), caps.get(2), caps.get(3))
            else {
                continue;
            };
            if open.as_str() != close.as_str() {
                continue;
            }
            // `<ns:Password>`: the local name.
            let name = open.as_str().rsplit(':').next().unwrap_or_default();
            let Some(strength) = classify_key(name) else {
                continue;
            };
            let raw = body.as_str();
            let lead = raw.len() - raw.trim_start().len();
            let value = Value {
                start: body.start() + lead,
                end: body.start() + raw.trim_end().len(),
                quoted: true,
                backtick: false,
            };
            if value.start >= value.end {
                continue;
            }
            let v = &text[value.start..value.end];
            // Words in an element are a description, not a password.
            if v.contains(char::is_whitespace) && !credential_like(v) {
                continue;
            }
            if let Some(v) = judge(text, value, strength, false) {
                push(out, SecretKind::EnvAssignment, v.start, v.end);
            }
        }
    }

    fn pairs(&self, text: &str, out: &mut Vec<Finding>) {
        for caps in self.pair.captures_iter(text) {
            let (Some(all), Some(name)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            if classify_key(name.as_str()).is_none() {
                continue;
            }
            let Some(value) = parse_value(text, all.end()) else {
                continue;
            };
            if value.quoted {
                credential(text, value, out);
            }
        }
    }

    fn fallbacks(&self, text: &str, out: &mut Vec<Finding>) {
        for caps in self.fallback.captures_iter(text) {
            let (Some(all), Some(name)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            if classify_key(name.as_str()).is_none() {
                continue;
            }
            let Some(value) = parse_value(text, all.end()) else {
                continue;
            };
            if value.quoted {
                credential(text, value, out);
            }
        }
    }

    fn prose(&self, text: &str, out: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        for verb in [&b" is "[..], b" was "] {
            for at in memchr::memmem::find_iter(bytes, verb) {
                // The one or two words before the verb: `password`, `API key`, `access token`.
                let name = words_before(bytes, at);
                if !ends_in_secret_word(&bytes[name.clone()]) {
                    continue;
                }
                let key = text[name].replace([' ', '-'], "_");
                if !matches!(classify_key(&key), Some(Strength::Normal)) {
                    continue;
                }
                let mut pos = at + verb.len();
                while pos < bytes.len() && matches!(bytes[pos], b' ' | b'\t' | b':') {
                    pos += 1;
                }
                self.prose_value(text, pos, out);
            }
        }
    }

    fn prose_value(&self, text: &str, pos: usize, out: &mut Vec<Finding>) {
        let Some(mut value) = parse_value(text, pos) else {
            return;
        };
        // The end of the sentence is not part of the value.
        let bytes = text.as_bytes();
        while value.end > value.start
            && matches!(
                bytes[value.end - 1],
                b'.' | b',' | b';' | b':' | b'!' | b'?'
            )
        {
            value.end -= 1;
        }
        let v = &text[value.start..value.end];
        // A sentence goes on with words: only a value with a digit and a letter, and not a
        // path, an address or a number with its unit, is taken.
        if v.len() < 8
            || !has_digit(v)
            || !v.bytes().any(|b| b.is_ascii_alphabetic())
            || v.contains(['/', '@'])
            || v.bytes().take_while(u8::is_ascii_digit).count() * 2 > v.len()
        {
            return;
        }
        credential(text, value, out);
    }

    fn short_flags(&self, text: &str, out: &mut Vec<Finding>) {
        for m in self.short_flag.find_iter(text) {
            let Some(value) = parse_value(text, m.end()) else {
                continue;
            };
            if let Some(v) = judge(text, value, Strength::Cli, false) {
                push(out, SecretKind::CliFlag, v.start, v.end);
            }
        }
    }

    fn netrc(&self, text: &str, out: &mut Vec<Finding>) {
        for m in self.netrc.find_iter(text) {
            let Some(value) = parse_value(text, m.end()) else {
                continue;
            };
            if let Some(v) = judge(text, value, Strength::Cli, false) {
                push(out, SecretKind::CliFlag, v.start, v.end);
            }
        }
    }
}

/// A value that must look like a credential by itself: six characters or more, with a digit,
/// both cases or a symbol, and no blank.
fn credential(text: &str, value: Value, out: &mut Vec<Finding>) {
    let v = &text[value.start..value.end];
    if v.contains(char::is_whitespace) {
        return;
    }
    if let Some(v) = judge(text, value, Strength::Cli, false) {
        push(out, SecretKind::EnvAssignment, v.start, v.end);
    }
}

/// The one or two words (letters and digits, joined by a blank or `-`) that end at `at`.
fn words_before(bytes: &[u8], at: usize) -> std::ops::Range<usize> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut start = at;
    while start > 0 && at - start < 64 && word(bytes[start - 1]) {
        start -= 1;
    }
    if start == at {
        return at..at;
    }
    let last = start;
    if start > 1 && matches!(bytes[start - 1], b' ' | b'-') && word(bytes[start - 2]) {
        let mut s = start - 1;
        while s > 0 && last - s < 64 && word(bytes[s - 1]) {
            s -= 1;
        }
        start = s;
    }
    start..at
}

/// Whether `name` ends in one of the words a secret's name ends in (case-insensitively): the
/// cheap test before [`classify_key`], as most sentences with `is` name no secret.
fn ends_in_secret_word(name: &[u8]) -> bool {
    const WORDS: [&[u8]; 9] = [
        b"password",
        b"passwd",
        b"passphrase",
        b"pwd",
        b"secret",
        b"token",
        b"key",
        b"credentials",
        b"credential",
    ];
    WORDS
        .iter()
        .any(|w| name.len() >= w.len() && name[name.len() - w.len()..].eq_ignore_ascii_case(w))
}
