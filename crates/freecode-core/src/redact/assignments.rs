//! Secrets by assignment: the windows a `:` or `=` whose key names a secret word opens, the
//! declarations that introduce one, a value repeated after it was found, the data of a
//! Kubernetes `Secret` manifest, the user beside a password, and the findings resolved into
//! disjoint ranges.

use std::collections::BTreeMap;
use std::ops::Range;

use aho_corasick::AhoCorasick;

use super::values::is_placeholder;
use super::{Finding, PLACEHOLDER_PREFIX, SecretKind, is_word, push};

/// Longest key an assignment is looked for in: a longer run of key characters before a `:` or
/// `=` is data (base64, a minified line), not a name.
pub(super) const MAX_KEY: usize = 200;

/// Whether a key byte run names a secret word of [`ASSIGNMENT_PATTERN`] (case-insensitively).
pub(super) fn mentions_secret_word(key: &[u8]) -> bool {
    const WORDS: [&[u8]; 11] = [
        b"pass",
        b"sonar",
        b"session",
        b"pwd",
        b"pw",
        b"secret",
        b"token",
        b"auth",
        b"key",
        b"credential",
        b"bundle_",
    ];
    WORDS
        .iter()
        .any(|w| key.windows(w.len()).any(|k| k.eq_ignore_ascii_case(w)))
}

/// The stretches of `text` that [`ASSIGNMENT_PATTERN`] can match in, merged: each is a key
/// (a run of key characters naming a secret word, at most [`MAX_KEY`] long), its optional
/// closing quote and blanks, and the separator with the blanks after it. Found from the `:` and
/// `=` bytes, so text without them costs one `memchr` pass.
pub(super) fn assignment_windows(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let key_byte = |b: u8| is_word(b) || b == b'.' || b == b'-';
    let mut windows: Vec<Range<usize>> = Vec::new();
    for p in memchr::memchr2_iter(b':', b'=', bytes) {
        if windows.last().is_some_and(|w| p < w.end) {
            continue;
        }
        // Back over the separator (`:=`, `!==`, `=>`), blanks, a closing quote and the `\`s
        // that escape it (JSON inside a JSON string escapes it twice over: `\\\"`).
        let mut k = p;
        while k > 0 && matches!(bytes[k - 1], b':' | b'=' | b'!' | b'?') && p - k < 3 {
            k -= 1;
        }
        while k > 0 && matches!(bytes[k - 1], b' ' | b'\t') {
            k -= 1;
        }
        if k > 0 && matches!(bytes[k - 1], b'"' | b'\'' | b'`') {
            k -= 1;
            while k > 0 && bytes[k - 1] == b'\\' && p - k < 16 {
                k -= 1;
            }
        }
        let key_end = k;
        let lo = key_end.saturating_sub(MAX_KEY + 1);
        let key_start = bytes[lo..key_end]
            .iter()
            .rposition(|&b| !key_byte(b))
            .map_or(lo, |i| lo + i + 1);
        if key_start == key_end
            || (key_start == lo && lo > 0)
            || !mentions_secret_word(&bytes[key_start..key_end])
        {
            continue;
        }
        // Forward over the separator and the blanks after it.
        let mut e = p;
        while e < bytes.len() && matches!(bytes[e], b':' | b'=' | b'>' | b'!') && e - p < 3 {
            e += 1;
        }
        while e < bytes.len() && matches!(bytes[e], b' ' | b'\t') {
            e += 1;
        }
        match windows.last_mut() {
            Some(w) if key_start <= w.end => w.end = w.end.max(e),
            _ => windows.push(key_start..e),
        }
    }
    windows
}

/// Keywords that, before `name =`/`name:`, make it a declaration in code.
pub(super) const DECLARATION_KEYWORDS: &[&str] = &[
    "let",
    "let mut",
    "const",
    "var",
    "val",
    "type",
    "pub",
    "static",
    "readonly",
    "private",
    "public",
    "protected",
];

/// How many times a text with findings is rescanned with them redacted.
pub(super) const MAX_EXTRA_PASSES: usize = 4;

/// Maps findings in `apply(text, done)` back to offsets in `text`. They never overlap a
/// placeholder, so each lies in a stretch of original text between two of `done`.
pub(super) fn map_back(done: &[Finding], more: &[Finding]) -> Vec<Finding> {
    // (start in the redacted text, start in the original, length) of each kept stretch.
    let mut kept = Vec::with_capacity(done.len() + 1);
    let (mut orig, mut red) = (0, 0);
    for f in done {
        kept.push((red, orig, f.start - orig));
        red += f.start - orig + PLACEHOLDER_PREFIX.len() + f.kind.name().len() + 1;
        orig = f.end;
    }
    kept.push((red, orig, usize::MAX - orig));
    more.iter()
        .filter_map(|m| {
            let i = kept
                .partition_point(|&(r, _, _)| r <= m.start)
                .checked_sub(1)?;
            let (r, o, len) = kept[i];
            (m.end - r <= len).then_some(Finding {
                kind: m.kind,
                start: o + (m.start - r),
                end: o + (m.end - r),
            })
        })
        .collect()
}

/// Shortest value whose other occurrences in the text are redacted too.
pub(super) const MIN_REPEATED_VALUE: usize = 8;

/// The values the findings of one [`Redactor::scan`] redact, and the automaton that finds them:
/// built once, and again only when a pass finds a new value.
#[derive(Default)]
pub(super) struct Repeats<'t> {
    pub(super) values: Vec<&'t str>,
    pub(super) automaton: Option<AhoCorasick>,
}

impl<'t> Repeats<'t> {
    /// `findings` plus every other occurrence of a value one of them redacts (`token = 'abc…' |
    /// 'abc…'`): once a value is known to be secret, it goes wherever it appears in the text.
    pub(super) fn add(&mut self, text: &'t str, findings: Vec<Finding>) -> Vec<Finding> {
        let mut values: Vec<&str> = Vec::new();
        let mut kinds: Vec<SecretKind> = Vec::new();
        for f in &findings {
            let value = &text[f.start..f.end];
            if value.len() >= MIN_REPEATED_VALUE && !values.contains(&value) {
                values.push(value);
                kinds.push(f.kind);
            }
        }
        if values.is_empty() {
            return findings;
        }
        if self.automaton.is_none() || self.values != values {
            // One pass over the text for all the values.
            self.automaton = AhoCorasick::new(&values).ok();
            self.values = values;
        }
        let Some(ac) = &self.automaton else {
            return findings;
        };
        let mut extra = Vec::new();
        for m in ac.find_iter(text) {
            if !findings.iter().any(|f| f.start == m.start()) {
                extra.push(Finding {
                    kind: kinds[m.pattern().as_usize()],
                    start: m.start(),
                    end: m.end(),
                });
            }
        }
        if extra.is_empty() {
            return findings;
        }
        let mut all = findings;
        all.extend(extra);
        resolve(text, all)
    }
}

/// Shortest value of a Kubernetes Secret's `data:` entry that is redacted: ten base64
/// characters, seven bytes (shorter ones, like 6-digit numbers elsewhere, are left).
pub(super) const MIN_SECRET_DATA: usize = 10;

/// The lines of `text` with their byte offsets (without the line break).
pub(super) fn lines_at(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    text.split('\n').map(move |l| {
        let start = at;
        at += l.len() + 1;
        (start, l.strip_suffix('\r').unwrap_or(l))
    })
}

pub(super) fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// A Kubernetes `kind: Secret` manifest (YAML): every value under its `data:` or `stringData:`
/// is a secret whatever its key (`extra`, `.dockercfg`), including `|`/`>` block values. The
/// manifest is a run of lines without a blank line or a `---`, and `kind:` sits at the
/// indentation of `data:`.
pub(super) fn collect_kubernetes_secret(text: &str, out: &mut Vec<Finding>) {
    let lines: Vec<(usize, &str)> = lines_at(text).collect();
    let mut first = 0;
    while first < lines.len() {
        let mut last = first;
        while last < lines.len()
            && !lines[last].1.trim().is_empty()
            && !lines[last].1.starts_with("---")
        {
            last += 1;
        }
        if last > first {
            kubernetes_manifest(&lines[first..last], out);
        }
        first = last + 1;
    }
}

pub(super) fn kubernetes_manifest(lines: &[(usize, &str)], out: &mut Vec<Finding>) {
    let unquote = |v: &str| {
        v.strip_prefix(['"', '\''])
            .and_then(|r| r.strip_suffix(['"', '\'']))
            .unwrap_or(v)
            .to_owned()
    };
    let secret_at = |level: usize| {
        lines.iter().any(|(_, l)| {
            indent(l) == level
                && l.trim_start()
                    .strip_prefix("kind:")
                    .is_some_and(|v| unquote(v.trim()).eq_ignore_ascii_case("secret"))
        })
    };
    let mut i = 0;
    while i < lines.len() {
        let (_, line) = lines[i];
        let head = line.trim();
        i += 1;
        let section = indent(line);
        if (head != "data:" && head != "stringData:") || !secret_at(section) {
            continue;
        }
        while i < lines.len() {
            let (at, entry) = lines[i];
            let level = indent(entry);
            if level <= section {
                break;
            }
            i += 1;
            let body = &entry[level..];
            let Some(colon) = body
                .find(": ")
                .or_else(|| body.strip_suffix(':').map(str::len))
            else {
                continue;
            };
            let raw = body[colon + 1..].trim();
            let raw = raw.split(" #").next().unwrap_or(raw).trim_end();
            if raw.starts_with(['|', '>']) {
                // A block value: the lines indented past the entry.
                while i < lines.len() && indent(lines[i].1) > level {
                    let (bat, bline) = lines[i];
                    let value = bline.trim();
                    if value.len() >= MIN_SECRET_DATA {
                        let start = bat + indent(bline);
                        push(out, SecretKind::EnvAssignment, start, start + value.len());
                    }
                    i += 1;
                }
                continue;
            }
            let value = unquote(raw);
            if value.len() < MIN_SECRET_DATA || is_placeholder(&value) {
                continue;
            }
            if let Some(offset) = entry.find(value.as_str()).filter(|&o| o > level + colon) {
                push(
                    out,
                    SecretKind::EnvAssignment,
                    at + offset,
                    at + offset + value.len(),
                );
            }
        }
    }
}

/// `scheme://root:root@host`: a user that is the password would give it away, so it goes too.
pub(super) fn same_user_as_password(text: &str, found: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    let mut users = Vec::new();
    for f in found.iter() {
        if f.kind != SecretKind::UrlCredentials
            || f.start == 0
            || bytes[f.start - 1] != b':'
            || bytes.get(f.end) != Some(&b'@')
        {
            continue;
        }
        let colon = f.start - 1;
        let Some(scheme_end) = text[..colon].rfind("://") else {
            continue;
        };
        let user = scheme_end + 3;
        if text[user..colon] == text[f.start..f.end] {
            users.push(Finding {
                kind: SecretKind::UrlCredentials,
                start: user,
                end: colon,
            });
        }
    }
    found.extend(users);
}

/// Whether a command-line argument can start at `pos` (start of text or after a separator).
pub(super) fn starts_argument(bytes: &[u8], pos: usize) -> bool {
    pos == 0
        || matches!(
            bytes[pos - 1],
            b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'`' | b'(' | b'[' | b','
        )
}

/// Keeps the most specific, then longest, candidates; drops anything overlapping an existing
/// placeholder; returns them sorted by start.
pub(super) fn resolve(text: &str, mut found: Vec<Finding>) -> Vec<Finding> {
    if found.is_empty() {
        return found;
    }
    let placeholders = placeholder_ranges(text);
    found.retain(|f| {
        text.is_char_boundary(f.start)
            && text.is_char_boundary(f.end)
            && !placeholders
                .iter()
                .any(|p| p.start < f.end && f.start < p.end)
    });
    found.sort_by(|a, b| {
        b.kind
            .rank()
            .cmp(&a.kind.rank())
            .then((b.end - b.start).cmp(&(a.end - a.start)))
            .then(a.start.cmp(&b.start))
    });
    let mut taken: BTreeMap<usize, Finding> = BTreeMap::new();
    for f in found {
        // Intervals in `taken` are disjoint: only the last one starting before `f.end` can
        // reach into `f`.
        if let Some((_, prev)) = taken.range(..f.end).next_back()
            && prev.end > f.start
        {
            continue;
        }
        taken.insert(f.start, f);
    }
    taken.into_values().collect()
}

/// The `[REDACTED:…]` placeholders already in `text`.
pub(super) fn placeholder_ranges(text: &str) -> Vec<Range<usize>> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(PLACEHOLDER_PREFIX) {
        let start = from + i;
        let body = start + PLACEHOLDER_PREFIX.len();
        let end = text[body..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .map_or(text.len(), |j| body + j);
        let end = if text.as_bytes().get(end) == Some(&b']') {
            end + 1
        } else {
            end
        };
        ranges.push(start..end);
        from = end.max(start + 1);
    }
    ranges
}
