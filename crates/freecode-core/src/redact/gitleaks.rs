//! gitleaks' rule set, loaded as data: the maintained rules secret scanners' users already
//! trust, in gitleaks' own configuration format (`rules/gitleaks.toml`, MIT, embedded at build
//! time), and a user's own rules in the same format merged over them
//! (`~/.freecode/redact.toml`, [`RuleSet::with_user`]).
//!
//! Every field a transcript can use is honoured as gitleaks does:
//!
//! - `keywords`: a rule runs only where one of its keywords occurs (case-insensitively); one
//!   Aho-Corasick pass over the text finds them all, and a rule's regex then runs on the text
//!   around its keywords' hits only (the whole text when it is small);
//! - `regex`, `secretGroup`: the secret is that group of the match, else the first non-empty
//!   group, else the whole match;
//! - `entropy`: the secret's Shannon entropy must be above it;
//! - a secret standing alone: where a rule's secret group starts with a literal long enough to
//!   name its format (`NRJS-`, `sq0csp-`, `xoxb-`), the group's pattern is also run on its own,
//!   so the token is found without the key name or assignment the rule wants around it
//!   ([`standalone`]); the rule's entropy floor and allowlists still apply;
//! - `allowlists` of a rule and the global `[allowlist]`: `regexes` (against the secret, the
//!   match or the line: `regexTarget`), `stopwords` (contained in the secret, case-insensitively)
//!   and `condition` (`OR`, the default, or `AND` of what the allowlist names). Path and commit
//!   allowlists, and rules that match paths only or only in files of a path (`path`), find
//!   nothing in a transcript, which has no path; what a rule of files keeps by its allowlist
//!   (the values its tests call near misses) is still left alone.
//!
//! Regexes are gitleaks' RE2 syntax, which Rust's `regex` accepts for every rule of the file once
//! a brace that repeats nothing is escaped ([`translate_re2`]; `tests`: each compiles); a user's
//! rule that does not is an error naming its line. They are compiled ASCII-only, as RE2 reads
//! `\w`, `\d`, `\s` and `\b` (and 60 times faster to compile than with Unicode classes: the
//! whole set in about 40 ms), and run on the text's bytes; a secret is widened to whole
//! characters.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::bytes::Regex;
use serde::Deserialize;
use toml::Spanned;

/// gitleaks' default configuration (`config/gitleaks.toml` of gitleaks/gitleaks; its licence is
/// `rules/gitleaks-LICENSE`), as the build embeds it.
pub const BUILTIN: &str = include_str!("../../rules/gitleaks.toml");

/// A rule file that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct RuleError {
    /// The 1-based line of the file the problem is on.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    #[allow(dead_code)]
    title: Option<String>,
    #[serde(default, rename = "minVersion")]
    #[allow(dead_code)]
    min_version: Option<String>,
    #[serde(default)]
    extend: Option<ExtendSpec>,
    #[serde(default)]
    allowlist: Option<AllowlistSpec>,
    #[serde(default)]
    allowlists: Vec<AllowlistSpec>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
}

/// `[extend]`: how a user's file stands on the built-in rules.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtendSpec {
    /// `false`: the user's rules alone (default `true`).
    #[serde(default, rename = "useDefault")]
    use_default: Option<bool>,
    /// Built-in rules to leave out.
    #[serde(default, rename = "disabledRules")]
    disabled_rules: Vec<String>,
    /// gitleaks reads another file here; a transcript redactor reads only the one.
    #[serde(default)]
    path: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowlistSpec {
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    condition: Option<Spanned<String>>,
    #[serde(default, rename = "regexTarget")]
    regex_target: Option<Spanned<String>>,
    #[serde(default)]
    regexes: Vec<Spanned<String>>,
    #[serde(default)]
    stopwords: Vec<Spanned<String>>,
    #[serde(default)]
    paths: Vec<String>,
    #[serde(default)]
    commits: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    id: Spanned<String>,
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    regex: Option<Spanned<String>>,
    #[serde(default, rename = "secretGroup")]
    secret_group: Option<usize>,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    tags: Vec<String>,
    /// The older single form of `allowlists`.
    #[serde(default)]
    allowlist: Option<AllowlistSpec>,
    #[serde(default)]
    allowlists: Vec<AllowlistSpec>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

/// One compiled allowlist.
#[derive(Debug, Clone)]
struct Allowlist {
    /// `AND`: every criterion it names must hold; `OR`: one is enough.
    all: bool,
    target: Target,
    regexes: Vec<Regex>,
    /// Lowercase.
    stopwords: Vec<String>,
}

/// One compiled rule.
#[derive(Debug, Clone)]
struct Rule {
    id: &'static str,
    regex: Regex,
    secret_group: Option<usize>,
    entropy: Option<f64>,
    /// Lowercase.
    keywords: Vec<String>,
    allowlists: Vec<Allowlist>,
    /// The secret group's pattern on its own and its literal prefixes (lowercase), when they
    /// name the format ([`standalone`]).
    alone: Option<(Regex, Vec<String>)>,
    /// A rule for files of one path (`path`): it finds nothing in a transcript, and what its
    /// allowlists keep is left alone ([`RuleSet::find_kept`]).
    files_only: bool,
}

/// How long a literal prefix of a rule's secret must be for the secret to be recognised on its
/// own: `NRJS-` or `sq0csp-` name a provider, `pk.` or a digit do not.
pub const MIN_PREFIX: usize = 3;
/// The shortest secret a rule's secret group may match to be recognised on its own.
pub const MIN_ALONE_LEN: usize = 16;

/// The pattern of `pattern`'s secret group (`group`, else the first group) when it starts with
/// literals of at least [`MIN_PREFIX`] bytes each and matches at least [`MIN_ALONE_LEN`]
/// bytes, and those literals (lowercase): the shape of a provider's token that is recognisable
/// with nothing around it. `None` for a rule whose secret is the whole match (its regex is
/// already the token's) or whose secret has no such prefix (`[a-z0-9]{32}`).
pub fn standalone(pattern: &str, group: Option<usize>) -> Option<(String, Vec<String>)> {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    use regex_syntax::hir::{Hir, HirKind};
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(&translate_re2(pattern))
        .ok()?;
    let want = u32::try_from(group.filter(|&g| g > 0).unwrap_or(1)).ok()?;
    fn find(h: &Hir, want: u32) -> Option<&Hir> {
        match h.kind() {
            HirKind::Capture(c) if c.index == want => Some(&c.sub),
            HirKind::Capture(c) => find(&c.sub, want),
            HirKind::Repetition(r) => find(&r.sub, want),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => hs.iter().find_map(|h| find(h, want)),
            _ => None,
        }
    }
    let sub = find(&hir, want)?;
    if sub.properties().minimum_len().unwrap_or(0) < MIN_ALONE_LEN {
        return None;
    }
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(sub);
    let literals = seq.literals()?;
    if literals.is_empty() || literals.iter().any(|l| l.as_bytes().len() < MIN_PREFIX) {
        return None;
    }
    let mut keywords: Vec<String> = literals
        .iter()
        .map(|l| String::from_utf8_lossy(l.as_bytes()).to_lowercase())
        .collect();
    keywords.sort();
    keywords.dedup();
    Some((sub.to_string(), keywords))
}

/// A secret a rule found: the rule's index, the secret and the whole match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The rule ([`RuleSet::id`]).
    pub rule: usize,
    /// The secret's bytes in the text.
    pub secret: Range<usize>,
    /// The whole match's bytes in the text.
    pub matched: Range<usize>,
}

/// A compiled rule set: the built-in rules ([`RuleSet::builtin`]), or those with a user's file
/// merged over them ([`RuleSet::with_user`]).
#[derive(Debug, Clone)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Every keyword of every rule (and every literal prefix of a secret recognised on its
    /// own), ASCII case-insensitively.
    keywords: AhoCorasick,
    /// The rules each keyword (by pattern index) lets run, and whether it lets the rule's
    /// secret be looked for on its own (`true`) or the rule's whole regex (`false`).
    keyword_rules: Vec<Vec<(usize, bool)>>,
    /// Rules without keywords: they run on every text.
    unkeyed: Vec<usize>,
    global: Vec<Allowlist>,
    /// gitleaks' generic rule (`generic-api-key`), kept when disabled: the redactor's own
    /// detectors of a key name and a value do its work, and its allowlists judge what they find
    /// ([`RuleSet::keeps_generic`], [`RuleSet::generic_keeps_at`]).
    generic: Option<Box<Rule>>,
    /// The ids the built-in overlay's `[extend] disabledRules` names (a user's file may not:
    /// see [`refuse_weakening`]): gitleaks' rules are left out of `rules`; the redactor's own
    /// detectors (`random-token`, `secret-assignment`, …) ask [`RuleSet::disables`].
    disabled: Vec<String>,
}

/// gitleaks' rule for a key name and a random value.
const GENERIC_RULE: &str = "generic-api-key";

/// freecode's own changes to gitleaks' rules, in the same format (`rules/freecode.toml`): the
/// rules it leaves to the redactor's own detectors, with the reason for each.
pub const OVERLAY: &str = include_str!("../../rules/freecode.toml");

/// The probes of the built-in rules ([`super::probes`]), made once per process.
pub fn builtin_probes() -> &'static super::probes::Probes {
    static PROBES: LazyLock<super::probes::Probes> = LazyLock::new(|| {
        let patterns = RuleSet::builtin().patterns();
        super::probes::Probes::generate(
            patterns.iter().map(String::as_str),
            super::Redactor::global(),
        )
    });
    &PROBES
}

static BUILTIN_SET: LazyLock<RuleSet> = LazyLock::new(|| {
    // The embedded files are checked by the tests: every rule compiles.
    let gitleaks = parse(BUILTIN)
        .and_then(|f| RuleSet::compile(&f, BUILTIN))
        .unwrap_or_else(|e| panic!("rules/gitleaks.toml: {e}"));
    gitleaks
        .merged(OVERLAY)
        .unwrap_or_else(|e| panic!("rules/freecode.toml: {e}"))
});

/// Texts up to this size are searched whole by every rule one of whose keywords they hold.
const WHOLE_TEXT: usize = 16 << 10;
/// Around a keyword's hit in a longer text, a rule searches this far back …
const BACK: usize = 512;
/// … and this far ahead (a match is a secret and its key, never kilobytes long; a private key
/// block is the store's own rule).
const AHEAD: usize = 2048;

fn parse(text: &str) -> Result<ConfigFile, RuleError> {
    toml::from_str(text).map_err(|e| RuleError {
        line: e.span().map_or(1, |s| line_of(text, s.start)),
        message: e.message().to_owned(),
    })
}

/// The 1-based line of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    1 + memchr::memchr_iter(b'\n', &text.as_bytes()[..at.min(text.len())]).count()
}

/// `pattern` (RE2 syntax) as Rust's `regex` reads the same thing. The one difference the rule
/// files meet: RE2 takes a `{` that does not open a counted repetition (`{2}`, `{2,}`,
/// `{2,5}`) as a literal brace, where `regex` refuses it; it is escaped.
pub fn translate_re2(pattern: &str) -> String {
    let b = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\\' => {
                // An escape: copy it and the (whole) character it escapes.
                let next = pattern[i + 1..].chars().next().map_or(0, char::len_utf8);
                out.push_str(&pattern[i..i + 1 + next]);
                i += 1 + next;
                continue;
            }
            b'[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                // A `]` (or `^]`) right at the start of a class is a literal.
                if b.get(i) == Some(&b'^') {
                    out.push('^');
                    i += 1;
                }
                if b.get(i) == Some(&b']') {
                    out.push(']');
                    i += 1;
                }
                continue;
            }
            b'[' if in_class && b.get(i + 1) == Some(&b':') => {
                // A POSIX class inside a class: `[:alpha:]`.
                if let Some(end) = pattern[i + 2..].find(":]") {
                    out.push_str(&pattern[i..i + 2 + end + 2]);
                    i += 2 + end + 2;
                    continue;
                }
            }
            b']' if in_class => in_class = false,
            b'{' if !in_class && !counted_repetition(&b[i + 1..]) => {
                out.push_str("\\{");
                i += 1;
                continue;
            }
            _ => {}
        }
        let ch = pattern[i..].chars().next().unwrap_or('\0');
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Whether `rest` (what follows a `{`) is `n}`, `n,}` or `n,m}`.
fn counted_repetition(rest: &[u8]) -> bool {
    let digits = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit()).count();
    let n = digits(rest);
    if n == 0 {
        return false;
    }
    match rest.get(n) {
        Some(b'}') => true,
        Some(b',') => {
            let m = digits(&rest[n + 1..]);
            rest.get(n + 1 + m) == Some(&b'}')
        }
        _ => false,
    }
}

fn compile_regex(text: &str, s: &Spanned<String>, what: &str) -> Result<Regex, RuleError> {
    regex::bytes::RegexBuilder::new(&translate_re2(s.get_ref()))
        .unicode(false)
        .size_limit(64 << 20)
        .build()
        .map_err(|e| RuleError {
            line: line_of(text, s.span().start),
            message: format!("{what}: {e}"),
        })
}

/// The shortest stopword a user's file may name (gitleaks' own are 3 characters or more): a
/// shorter one is contained in most secrets.
pub const MIN_STOPWORD: usize = 3;

/// Secret-shaped strings an allowlist entry must not keep all or most of: one of each common
/// shape (a provider-prefixed token, an access key id, a hex digest, base64, a password), so an
/// entry that keeps them is one that keeps anything.
const PROBES: &[&[u8]] = &[
    b"ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8w",
    b"AKIAZ7QW3ERT5YUI9OPL",
    b"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    b"qL7vX2nR9sT4wY8zB3cF6hJ1kM5pU0eG/+dA=",
    b"Tr0ub4dor&3-h0rse",
    b"xoxb-2048-4096-AbCdEfGhIjKlMnOpQrStUvWx",
    b"sk-proj-8aF3kLm9Qz2Xw7Rt5Yv1Bn4Cs6Dp0Eg",
    b"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
];

/// A user's file may add rules and allowlists, never take a built-in rule away or switch
/// redaction off by accident. Refused, with their line: `[extend] useDefault = false` and
/// `disabledRules`; a rule with a built-in rule's id and a regex of its own (it would replace
/// it) or a higher entropy floor; a rule that can match the empty string (it would stand where
/// real secrets are and hide them); an allowlist entry that matches the empty string or keeps
/// most of [`PROBES`]; an empty stopword (contained in every secret).
fn refuse_weakening(text: &str, user: &ConfigFile, builtin: &RuleSet) -> Result<(), RuleError> {
    let refuse = |at: usize, message: String| RuleError {
        line: line_of(text, at),
        message,
    };
    let key_at = |key: &str| text.find(key).unwrap_or(0);
    if let Some(e) = &user.extend {
        if e.use_default == Some(false) {
            return Err(refuse(
                key_at("useDefault"),
                "useDefault = false would leave out every built-in rule: a redact.toml only \
                 adds rules and allowlists"
                    .to_owned(),
            ));
        }
        if let Some(id) = e.disabled_rules.first() {
            return Err(refuse(
                key_at("disabledRules"),
                format!(
                    "disabledRules would leave out {id:?}: a redact.toml only adds; to keep \
                     values that are not secrets, add an [[allowlists]] entry anchored to them"
                ),
            ));
        }
    }
    for spec in &user.rules {
        let id = spec.id.get_ref();
        if let Some(rule) = builtin.rules.iter().find(|r| r.id == id) {
            if spec.regex.is_some() {
                return Err(refuse(
                    spec.id.span().start,
                    format!(
                        "rule {id:?} is a built-in rule's id: a regex here would replace it; give \
                         your rule an id of its own (or leave the regex out to add keywords \
                         and allowlists to the built-in one)"
                    ),
                ));
            }
            if let Some(e) = spec.entropy
                && rule.entropy.is_none_or(|floor| e > floor)
            {
                return Err(refuse(
                    spec.id.span().start,
                    format!("rule {id:?}: entropy {e} would let the built-in rule miss secrets"),
                ));
            }
        }
    }
    for spec in &user.rules {
        if let Some(p) = &spec.regex
            && compile_regex(text, p, "regex")?.is_match(b"")
        {
            return Err(refuse(
                p.span().start,
                format!(
                    "rule {:?}: its regex {:?} matches the empty string, so it would stand \
                     where real secrets are and hide them: make it match at least one character",
                    spec.id.get_ref(),
                    p.get_ref()
                ),
            ));
        }
    }
    let allowlists = user.allowlist.iter().chain(&user.allowlists).chain(
        user.rules
            .iter()
            .flat_map(|r| r.allowlist.iter().chain(&r.allowlists)),
    );
    for a in allowlists {
        for r in &a.regexes {
            let regex = compile_regex(text, r, "allowlist regex")?;
            let kept = PROBES.iter().filter(|p| regex.is_match(p)).count();
            if regex.is_match(b"") || kept * 2 > PROBES.len() {
                return Err(refuse(
                    r.span().start,
                    format!(
                        "allowlist regex {:?} keeps {}: it would switch redaction off; \
                         anchor it to the values it means",
                        r.get_ref(),
                        if regex.is_match(b"") {
                            "everything (it matches the empty string)".to_owned()
                        } else {
                            format!("{kept} of {} secret-shaped test strings", PROBES.len())
                        }
                    ),
                ));
            }
        }
        if let Some(w) = a
            .stopwords
            .iter()
            .find(|w| w.get_ref().trim().chars().count() < MIN_STOPWORD)
        {
            return Err(refuse(
                w.span().start,
                format!(
                    "stopword {:?} is shorter than {MIN_STOPWORD} characters: contained in most \
                     secrets, it would keep them from redaction; name a whole word",
                    w.get_ref()
                ),
            ));
        }
    }
    Ok(())
}

/// Refuses `user`'s file (merged as `merged`) when its allowlists and stopwords together keep
/// too many of the built-in probes from redaction ([`super::probes::Probes`]), naming the
/// lines of every allowlist entry.
fn refuse_leaky(text: &str, user: &ConfigFile, merged: &RuleSet) -> Result<(), RuleError> {
    let specs: Vec<&AllowlistSpec> = user
        .allowlist
        .iter()
        .chain(&user.allowlists)
        .chain(
            user.rules
                .iter()
                .flat_map(|r| r.allowlist.iter().chain(&r.allowlists)),
        )
        .collect();
    if specs.is_empty() {
        return Ok(());
    }
    let probes = builtin_probes();
    let redactor = super::Redactor::with_rules(std::sync::Arc::new(merged.clone()));
    let kept = probes.kept_by(&redactor);
    if !probes.too_many(kept) {
        return Ok(());
    }
    let mut lines: Vec<usize> = specs
        .iter()
        .flat_map(|a| {
            a.regexes
                .iter()
                .map(|r| r.span().start)
                .chain(a.stopwords.iter().map(|w| w.span().start))
                .chain(a.regex_target.iter().map(|t| t.span().start))
        })
        .map(|at| line_of(text, at))
        .collect();
    lines.sort_unstable();
    lines.dedup();
    let named: Vec<String> = lines.iter().map(ToString::to_string).collect();
    Err(RuleError {
        line: lines.first().copied().unwrap_or(1),
        message: format!(
            "the allowlists together keep {kept} of {} secret-shaped test lines (more than 1 \
             in 100) from redaction: they would switch it off; anchor each entry to the values \
             it means (allowlist lines {})",
            probes.len(),
            named.join(", ")
        ),
    })
}

fn compile_allowlist(text: &str, a: &AllowlistSpec) -> Result<Option<Allowlist>, RuleError> {
    let all = match a
        .condition
        .as_ref()
        .map(|c| c.get_ref().to_ascii_uppercase())
    {
        None => false,
        Some(c) if c == "OR" => false,
        Some(c) if c == "AND" => true,
        Some(c) => {
            let at = a.condition.as_ref().map_or(0, |c| c.span().start);
            return Err(RuleError {
                line: line_of(text, at),
                message: format!("condition {c:?}: use OR or AND"),
            });
        }
    };
    let target = match a.regex_target.as_ref().map(|t| t.get_ref().as_str()) {
        None | Some("secret") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(t) => {
            let at = a.regex_target.as_ref().map_or(0, |t| t.span().start);
            return Err(RuleError {
                line: line_of(text, at),
                message: format!("regexTarget {t:?}: use secret, match or line"),
            });
        }
    };
    let regexes = a
        .regexes
        .iter()
        .map(|r| compile_regex(text, r, "allowlist regex"))
        .collect::<Result<Vec<_>, _>>()?;
    let stopwords: Vec<String> = a
        .stopwords
        .iter()
        .map(|w| w.get_ref().to_lowercase())
        .collect();
    // Only paths or commits: nothing of it applies to a transcript (with AND, such an
    // allowlist can never hold here either).
    let transcript_criteria = !regexes.is_empty() || !stopwords.is_empty();
    let other_criteria = !a.paths.is_empty() || !a.commits.is_empty();
    if !transcript_criteria || (all && other_criteria) {
        return Ok(None);
    }
    Ok(Some(Allowlist {
        all,
        target,
        regexes,
        stopwords,
    }))
}

/// A rule id kept for the life of the process: findings name their rule by it.
fn leak(id: &str) -> &'static str {
    Box::leak(id.to_owned().into_boxed_str())
}

impl RuleSet {
    /// The built-in rules (gitleaks' default configuration), compiled once per process.
    pub fn builtin() -> &'static RuleSet {
        &BUILTIN_SET
    }

    /// The built-in rules with a user's file (`text`, gitleaks' format) merged over them:
    /// `[[rules]]` are added (a rule without a `regex` that names a built-in rule adds its
    /// keywords and allowlists to it); `[allowlist]` and `[[allowlists]]` entries join the
    /// global allowlist. A user's file only adds: what would take a built-in rule away or
    /// switch redaction off is refused (see [`refuse_weakening`]). An error names the line.
    ///
    /// The file's allowlists and stopwords are then judged together: applied to secret-shaped
    /// lines generated from the built-in rules' own regexes ([`super::probes`]), they may
    /// keep at most 1 in 100 of those the built-in rules find; past that the file is refused
    /// with the lines of its allowlists (two entries that each keep half, together keep all).
    pub fn with_user(text: &str) -> Result<RuleSet, RuleError> {
        Self::with_user_judged(text, false)
    }

    /// [`RuleSet::with_user`], the judgement of the allowlists as a whole left out when
    /// `judged` (this very text passed it before: a verdict the caller kept).
    pub fn with_user_judged(text: &str, judged: bool) -> Result<RuleSet, RuleError> {
        let builtin = RuleSet::builtin();
        let user = parse(text)?;
        refuse_weakening(text, &user, builtin)?;
        let merged = builtin.merge(text, &user)?;
        if !judged {
            refuse_leaky(text, &user, &merged)?;
        }
        Ok(merged)
    }

    /// The regexes of the rules that can find something in a transcript (not those of files
    /// of a path only), as compiled.
    pub fn patterns(&self) -> Vec<String> {
        self.rules
            .iter()
            .filter(|r| !r.files_only)
            .map(|r| r.regex.as_str().to_owned())
            .collect()
    }

    /// These rules with the file `text` merged over them (the built-in overlay).
    fn merged(&self, text: &str) -> Result<RuleSet, RuleError> {
        self.merge(text, &parse(text)?)
    }

    /// These rules with `user`, parsed from `text`, merged over them.
    fn merge(&self, text: &str, user: &ConfigFile) -> Result<RuleSet, RuleError> {
        let extend = user.extend.as_ref();
        if let Some(p) = extend.and_then(|e| e.path.as_ref()) {
            return Err(RuleError {
                line: line_of(text, p.span().start),
                message: "[extend] path: this file is read alone; put the rules in it".into(),
            });
        }
        let mut merged = self.clone();
        if extend.and_then(|e| e.use_default) == Some(false) {
            merged.rules.clear();
            merged.global.clear();
            merged.generic = None;
        }
        if let Some(e) = extend {
            merged
                .rules
                .retain(|r| !e.disabled_rules.iter().any(|d| d == r.id));
            merged.disabled.extend(e.disabled_rules.iter().cloned());
        }
        for a in user.allowlist.iter().chain(&user.allowlists) {
            merged.global.extend(compile_allowlist(text, a)?);
        }
        for spec in &user.rules {
            let id = spec.id.get_ref().as_str();
            let at = merged.rules.iter().position(|r| r.id == id);
            match (at, compile_rule(text, spec)?) {
                (Some(i), Some(rule)) => merged.rules[i] = rule,
                (None, Some(rule)) => merged.rules.push(rule),
                (Some(i), None) => {
                    let r = &mut merged.rules[i];
                    r.keywords
                        .extend(spec.keywords.iter().map(|k| k.to_lowercase()));
                    for a in spec.allowlist.iter().chain(&spec.allowlists) {
                        r.allowlists.extend(compile_allowlist(text, a)?);
                    }
                    if let Some(e) = spec.entropy {
                        r.entropy = Some(e);
                    }
                }
                (None, None) if id == GENERIC_RULE && merged.generic.is_some() => {
                    // Disabled, but its allowlists still judge the redactor's own detectors.
                    if let Some(g) = merged.generic.as_mut() {
                        for a in spec.allowlist.iter().chain(&spec.allowlists) {
                            g.allowlists.extend(compile_allowlist(text, a)?);
                        }
                    }
                }
                (None, None) => {
                    return Err(RuleError {
                        line: line_of(text, spec.id.span().start),
                        message: format!("rule {id:?} has no regex and extends no built-in rule"),
                    });
                }
            }
        }
        merged.index()
    }

    fn compile(file: &ConfigFile, text: &str) -> Result<RuleSet, RuleError> {
        let mut global = Vec::new();
        for a in file.allowlist.iter().chain(&file.allowlists) {
            global.extend(compile_allowlist(text, a)?);
        }
        let mut rules = Vec::new();
        for spec in &file.rules {
            rules.extend(compile_rule(text, spec)?);
        }
        RuleSet {
            rules,
            keywords: AhoCorasick::new::<[&str; 0], _>([]).map_err(|e| RuleError {
                line: 1,
                message: e.to_string(),
            })?,
            keyword_rules: Vec::new(),
            unkeyed: Vec::new(),
            disabled: Vec::new(),
            generic: None,
            global,
        }
        .index()
        .map(|mut set| {
            set.generic = set
                .rules
                .iter()
                .find(|r| r.id == GENERIC_RULE)
                .cloned()
                .map(Box::new);
            set
        })
    }

    /// Builds the keyword automaton of the rules.
    fn index(mut self) -> Result<RuleSet, RuleError> {
        let mut patterns: Vec<String> = Vec::new();
        let mut by_keyword: HashMap<String, usize> = HashMap::new();
        let mut keyword_rules: Vec<Vec<(usize, bool)>> = Vec::new();
        let mut unkeyed = Vec::new();
        for (i, r) in self.rules.iter().enumerate() {
            if r.keywords.is_empty() {
                unkeyed.push(i);
            }
            let alone = r
                .alone
                .iter()
                .flat_map(|(_, ks)| ks.iter().map(|k| (k, true)));
            for (k, is_alone) in r.keywords.iter().map(|k| (k, false)).chain(alone) {
                let at = *by_keyword.entry(k.clone()).or_insert_with(|| {
                    patterns.push(k.clone());
                    keyword_rules.push(Vec::new());
                    patterns.len() - 1
                });
                if !keyword_rules[at].contains(&(i, is_alone)) {
                    keyword_rules[at].push((i, is_alone));
                }
            }
        }
        self.keywords = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .or_else(|_| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&patterns)
            })
            .map_err(|e| RuleError {
                line: 1,
                message: format!("keywords: {e}"),
            })?;
        self.keyword_rules = keyword_rules;
        self.unkeyed = unkeyed;
        Ok(self)
    }

    /// Whether the global allowlist (gitleaks' and a user's) keeps `value`, a secret one of the
    /// redactor's own detectors found.
    pub fn keeps(&self, value: &str) -> bool {
        self.global
            .iter()
            .filter(|a| a.target == Target::Secret)
            .any(|a| a.allows(value, value, value))
    }

    /// Whether the built-in overlay's `[extend] disabledRules` names `id` (a rule of this set,
    /// or one of the redactor's own detectors: `random-token`, `secret-assignment`, …).
    pub fn disables(&self, id: &str) -> bool {
        self.disabled.iter().any(|d| d == id)
    }

    /// Whether the allowlists of gitleaks' generic rule that look at the secret alone keep
    /// `value` (its pattern of words without digits): applied to what the
    /// redactor's own detectors of a key name and a value find (an assignment, a flag, a random
    /// token), which do that rule's work.
    pub fn keeps_generic(&self, value: &str) -> bool {
        self.generic
            .iter()
            .flat_map(|r| &r.allowlists)
            .filter(|a| a.target == Target::Secret)
            .any(|a| a.allows(value, value, value))
    }

    /// Whether gitleaks' generic rule, run on the line around `at` (a value one of the
    /// redactor's own detectors found there), matches a secret overlapping it that an allowlist
    /// of the rule keeps by its match or its line: `publicToken = "…"`, `key_id: …`,
    /// `api_url=…`, an `import { … } from '…'` line. Run only on a finding, never on every text.
    pub fn generic_keeps_at(&self, text: &str, at: Range<usize>) -> bool {
        let Some(rule) = self.generic.as_deref() else {
            return false;
        };
        let lists: Vec<&Allowlist> = rule
            .allowlists
            .iter()
            .filter(|a| a.target != Target::Secret)
            .collect();
        if lists.is_empty() {
            return false;
        }
        let bytes = text.as_bytes();
        let mut from = memchr::memrchr(b'\n', &bytes[..at.start])
            .map_or(0, |i| i + 1)
            .max(at.start.saturating_sub(BACK));
        let mut to = memchr::memchr(b'\n', &bytes[at.end..])
            .map_or(text.len(), |i| at.end + i)
            .min(at.end.saturating_add(AHEAD).min(text.len()));
        while !text.is_char_boundary(from) {
            from -= 1;
        }
        while !text.is_char_boundary(to) {
            to += 1;
        }
        rule.regex.captures_iter(&bytes[from..to]).any(|caps| {
            let Some(whole) = caps.get(0) else {
                return false;
            };
            let secret = match rule.secret_group {
                Some(g) if g > 0 => caps.get(g),
                _ => (1..caps.len())
                    .filter_map(|g| caps.get(g))
                    .find(|m| !m.is_empty()),
            };
            let Some(secret) = secret else {
                return false;
            };
            let (start, end) = (from + secret.start(), from + secret.end());
            if !(start < at.end && at.start < end) {
                return false;
            }
            let (Some(s), Some(matched)) = (
                text.get(start..end),
                text.get(from + whole.start()..from + whole.end()),
            ) else {
                return false;
            };
            let line = line_around(text, &(start..end));
            lists.iter().any(|a| a.allows_by_regex(s, matched, line))
        })
    }

    /// These rules with only the one of id `id` (and the global allowlist): what gitleaks' own
    /// tests run a rule's true and false positives against. `None` for an id it does not have.
    pub fn only(&self, id: &str) -> Option<RuleSet> {
        let rule = self
            .rules
            .iter()
            .find(|r| r.id == id && !r.files_only)?
            .clone();
        let mut one = self.clone();
        one.rules = vec![rule];
        one.index().ok()
    }

    /// How many rules run on a transcript (those for files of one path aside).
    pub fn len(&self) -> usize {
        self.rules.iter().filter(|r| !r.files_only).count()
    }

    /// Whether none does.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The id of rule `i` (`github-pat`), what a redaction marker names.
    pub fn id(&self, i: usize) -> &'static str {
        self.rules[i].id
    }

    /// The index of the rule with this id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.rules.iter().position(|r| r.id == id)
    }

    /// Every secret the rules find in `text`, in no particular order (overlaps included).
    pub fn find(&self, text: &str, out: &mut Vec<Hit>) {
        self.find_kept(text, out, &mut Vec::new());
    }

    /// [`find`](Self::find), and in `kept` what a rule matched but one of its own allowlists
    /// kept (a published example key, a `publicToken`, a value gitleaks' tests call a near
    /// miss): the redactor's own shapeless detectors leave those alone too.
    pub fn find_kept(&self, text: &str, out: &mut Vec<Hit>, kept: &mut Vec<Hit>) {
        // Where each rule's keywords occur (and the prefixes of its secret alone); a hit inside
        // a blob of data (a base64 image) gates nothing.
        let mut blobs: Option<Vec<Range<usize>>> = None;
        let mut windows: HashMap<(usize, bool), Vec<Range<usize>>> = HashMap::new();
        for m in self.keywords.find_overlapping_iter(text) {
            // Found only once a keyword is: most texts have none.
            let blobs = blobs.get_or_insert_with(|| find_blobs(text.as_bytes()));
            if in_blob(blobs, m.start(), m.end()) {
                continue;
            }
            for &key in &self.keyword_rules[m.pattern().as_usize()] {
                windows.entry(key).or_default().push(m.start()..m.end());
            }
        }
        for &rule in &self.unkeyed {
            windows
                .entry((rule, false))
                .or_default()
                .push(0..text.len());
        }
        let mut keys: Vec<(usize, bool)> = windows.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let hits = &windows[&key];
            if text.len() <= WHOLE_TEXT {
                self.run(key, text, 0..text.len(), out, kept);
                continue;
            }
            for w in merge(text, hits) {
                self.run(key, text, w, out, kept);
            }
        }
    }

    /// Rule `i` (its whole regex, or its secret alone) over `text[window]`.
    fn run(
        &self,
        (i, alone): (usize, bool),
        text: &str,
        window: Range<usize>,
        out: &mut Vec<Hit>,
        kept: &mut Vec<Hit>,
    ) {
        let rule = &self.rules[i];
        let regex = match (&rule.alone, alone) {
            (Some((r, _)), true) => r,
            (None, true) => return,
            (_, false) => &rule.regex,
        };
        let base = window.start;
        let bytes = text.as_bytes();
        let hay = &bytes[window];
        for caps in regex.captures_iter(hay) {
            let Some(whole) = caps.get(0) else { continue };
            if alone && !delimited(bytes, base + whole.start(), base + whole.end()) {
                continue;
            }
            let secret = match rule.secret_group {
                _ if alone => Some(whole),
                Some(g) if g > 0 => caps.get(g),
                _ => (1..caps.len())
                    .filter_map(|g| caps.get(g))
                    .find(|m| !m.is_empty())
                    .or(Some(whole)),
            };
            let Some(secret) = secret else { continue };
            // gitleaks trims newlines off a match; a match is widened to whole characters.
            let (mut start, mut end) = (base + secret.start(), base + secret.end());
            while start < end && text.as_bytes()[start] == b'\n' {
                start += 1;
            }
            while end > start && text.as_bytes()[end - 1] == b'\n' {
                end -= 1;
            }
            if start == end {
                continue;
            }
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let s = &text[start..end];
            if let Some(floor) = rule.entropy
                && shannon(s) <= floor
            {
                continue;
            }
            let mut matched = base + whole.start()..base + whole.end();
            while !text.is_char_boundary(matched.start) {
                matched.start -= 1;
            }
            while !text.is_char_boundary(matched.end) {
                matched.end += 1;
            }
            let line = line_around(text, &matched);
            let allowed = |a: &Allowlist| a.allows(s, &text[matched.clone()], line);
            let keep = self.global.iter().any(allowed) || rule.allowlists.iter().any(allowed);
            let hit = Hit {
                rule: i,
                secret: start..end,
                matched,
            };
            if keep {
                kept.push(hit);
            } else if !rule.files_only {
                out.push(hit);
            }
        }
    }
}

impl Allowlist {
    /// Whether this allowlist's regexes keep `secret` (of `matched`, on `line`), its stopwords
    /// aside: gitleaks' generic stopwords are common words (`pull`, `data`), which a long random
    /// value holds by chance, and a value the redactor's detectors found has more evidence
    /// than that rule's match.
    fn allows_by_regex(&self, secret: &str, matched: &str, line: &str) -> bool {
        if self.all && !self.stopwords.is_empty() {
            return false;
        }
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        self.regexes.iter().any(|r| r.is_match(target.as_bytes()))
    }

    /// Whether this allowlist keeps `secret` (of `matched`, on `line`).
    fn allows(&self, secret: &str, matched: &str, line: &str) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        let lower = secret.to_lowercase();
        let regex = (!self.regexes.is_empty())
            .then(|| self.regexes.iter().any(|r| r.is_match(target.as_bytes())));
        let stop = (!self.stopwords.is_empty())
            .then(|| self.stopwords.iter().any(|w| lower.contains(w.as_str())));
        let criteria = [regex, stop];
        if self.all {
            criteria.iter().flatten().all(|&c| c)
        } else {
            criteria.iter().flatten().any(|&c| c)
        }
    }
}

fn compile_rule(text: &str, spec: &RuleSpec) -> Result<Option<Rule>, RuleError> {
    let id = spec.id.get_ref();
    if id.is_empty()
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(RuleError {
            line: line_of(text, spec.id.span().start),
            message: format!(
                "rule id {id:?}: use letters, digits, '-', '_' and '.' (it names the redaction)"
            ),
        });
    }
    let _ = &spec.tags;
    let Some(pattern) = &spec.regex else {
        // A rule on paths alone (or a rule that only extends another, see `with_user`).
        return Ok(None);
    };
    let regex = compile_regex(text, pattern, &format!("rule {id:?}: regex"))?;
    // A rule for one kind of file (`\.php$`): gitleaks runs it only on a file whose path
    // matches, and a transcript's text has none. Its allowlist still says what is not a secret
    // (a value its tests list as a near miss), so it runs for that alone.
    let files_only = spec.path.is_some();
    if let Some(g) = spec.secret_group
        && g >= regex.captures_len()
    {
        return Err(RuleError {
            line: line_of(text, pattern.span().start),
            message: format!(
                "rule {id:?}: secretGroup {g}, but the regex has {} groups",
                regex.captures_len() - 1
            ),
        });
    }
    let mut allowlists = Vec::new();
    for a in spec.allowlist.iter().chain(&spec.allowlists) {
        allowlists.extend(compile_allowlist(text, a)?);
    }
    if files_only && allowlists.is_empty() {
        // Nothing it could keep: not run at all.
        return Ok(None);
    }
    let alone = if regex.captures_len() > 1 {
        standalone(pattern.get_ref(), spec.secret_group).and_then(|(p, keywords)| {
            let r = regex::bytes::RegexBuilder::new(&p)
                .unicode(false)
                .size_limit(64 << 20)
                .build()
                .ok()?;
            Some((r, keywords))
        })
    } else {
        None
    };
    Ok(Some(Rule {
        id: leak(id),
        regex,
        secret_group: spec.secret_group,
        entropy: spec.entropy,
        keywords: spec.keywords.iter().map(|k| k.to_lowercase()).collect(),
        allowlists,
        alone: alone.filter(|_| !files_only),
        files_only,
    }))
}

/// A run of the base64 alphabet this long is data (an image, an archive, a key block's body):
/// a keyword that happens to spell itself in it (`ey`, `key`) is not one. Secrets are far
/// shorter; a key block has its own rule.
pub const BLOB_BYTES: usize = 1024;

/// The runs of at least [`BLOB_BYTES`] base64 bytes of `bytes`, in order.
fn find_blobs(bytes: &[u8]) -> Vec<Range<usize>> {
    let is_b64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_b64(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_b64(bytes[i]) {
            i += 1;
        }
        if i - start >= BLOB_BYTES {
            out.push(start..i);
        }
    }
    out
}

/// Whether `start..end` lies inside one of `blobs` (sorted), not at its edge.
fn in_blob(blobs: &[Range<usize>], start: usize, end: usize) -> bool {
    let at = blobs.partition_point(|b| b.end <= start);
    blobs
        .get(at)
        .is_some_and(|b| b.start < start && end < b.end)
}

/// Whether `bytes[start..end]` stands as a token of its own: after the start of the text, a
/// blank, a quote or an opening bracket, `=`, `:`, `,` or `|`; before the end, a blank, a quote,
/// a closing bracket, `;`, `,`, `|`, `<`, `>`, a backslash (an escaped `\n`) or a `.` that ends a
/// sentence. Not glued to more of a word, a file name (`box.ico-…png`) or a call (`GLC_Name(`).
fn delimited(bytes: &[u8], start: usize, end: usize) -> bool {
    let before = start.checked_sub(1).map(|i| bytes[i]);
    let after = bytes.get(end).copied();
    let opens = before.is_none_or(|b| {
        b.is_ascii_whitespace()
            || matches!(
                b,
                b'"' | b'\'' | b'`' | b'(' | b'[' | b'{' | b'<' | b'>' | b'=' | b':' | b',' | b'|'
            )
    });
    let closes = after.is_none_or(|b| {
        b.is_ascii_whitespace()
            || matches!(
                b,
                b'"' | b'\'' | b'`' | b')' | b']' | b'}' | b';' | b',' | b'|' | b'<' | b'>' | b'\\'
            )
            || (b == b'.' && bytes.get(end + 1).is_none_or(|n| n.is_ascii_whitespace()))
    });
    opens && closes
}

/// The windows around `hits` (sorted and merged), each from a line start before the hit (at
/// most [`BACK`] bytes back, further only to reach a byte that is not part of a word) to the
/// [`AHEAD`] bytes after it, on character boundaries.
fn merge(text: &str, hits: &[Range<usize>]) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut ws: Vec<Range<usize>> = hits
        .iter()
        .map(|h| {
            let mut a = h.start.saturating_sub(BACK);
            // Never start inside a word: a `\b` at the window's start would be a false one.
            let floor = h.start.saturating_sub(2 * BACK);
            while a > floor && bytes[a - 1].is_ascii_alphanumeric() {
                a -= 1;
            }
            while !text.is_char_boundary(a) {
                a -= 1;
            }
            let mut b = (h.end + AHEAD).min(text.len());
            while b < text.len() && bytes[b].is_ascii_alphanumeric() && b < h.end + 2 * AHEAD {
                b += 1;
            }
            while !text.is_char_boundary(b) {
                b += 1;
            }
            a..b
        })
        .collect();
    ws.sort_by_key(|w| w.start);
    let mut out: Vec<Range<usize>> = Vec::new();
    for w in ws {
        match out.last_mut() {
            Some(last) if w.start <= last.end => last.end = last.end.max(w.end),
            _ => out.push(w),
        }
    }
    out
}

/// The line of `text` that holds the start of `r`.
fn line_around<'t>(text: &'t str, r: &Range<usize>) -> &'t str {
    let bytes = text.as_bytes();
    let start = memchr::memrchr(b'\n', &bytes[..r.start]).map_or(0, |i| i + 1);
    let end =
        memchr::memchr(b'\n', &bytes[r.end.min(text.len())..]).map_or(text.len(), |i| r.end + i);
    &text[start..end.max(start)]
}

/// The Shannon entropy of `s`'s bytes, in bits per byte (gitleaks' measure).
pub fn shannon(s: &str) -> f64 {
    if s.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_rule_compiles() {
        let file = parse(BUILTIN).unwrap();
        let mut compiled = 0;
        for r in &file.rules {
            if let Some(p) = &r.regex {
                compile_regex(BUILTIN, p, r.id.get_ref()).unwrap();
                compiled += 1;
            }
        }
        let for_files = file
            .rules
            .iter()
            .filter(|r| r.regex.is_some() && r.path.is_some())
            .count();
        let set = RuleSet::builtin();
        println!(
            "{} rules in the file: {compiled} regexes, all compiled; {} run on transcripts \
             ({for_files} only on files of a path)",
            file.rules.len(),
            set.len()
        );
        let disabled = parse(OVERLAY)
            .unwrap()
            .extend
            .map_or(0, |e| e.disabled_rules.len());
        assert_eq!(set.len(), compiled - for_files - disabled);
        assert!(set.len() > 200, "{}", set.len());
        assert!(!set.global.is_empty());
    }

    #[test]
    fn re2_braces_that_repeat_nothing_are_literals() {
        for (re2, rust) in [
            (r"^\$(?:\d+|{\d+})$", r"^\$(?:\d+|\{\d+})$"),
            (r"a{2}b{3,}c{1,4}", r"a{2}b{3,}c{1,4}"),
            (r"[{}]x{", r"[{}]x\{"),
            (r"\{\{ {{ x }}", r"\{\{ \{\{ x }}"),
            (r"[[:alpha:]{]{2}", r"[[:alpha:]{]{2}"),
            (r"[]{]", r"[]{]"),
            (r"é{", r"é\{"),
        ] {
            assert_eq!(translate_re2(re2), rust, "{re2}");
            assert!(regex::Regex::new(&translate_re2(re2)).is_ok(), "{re2}");
        }
    }

    #[test]
    fn entropy_is_bits_per_byte() {
        assert_eq!(shannon(""), 0.0);
        assert_eq!(shannon("aaaa"), 0.0);
        assert!((shannon("ab") - 1.0).abs() < 1e-9);
        assert!((shannon("abcd") - 2.0).abs() < 1e-9);
    }
}
