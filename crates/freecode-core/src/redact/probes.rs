//! A user's allowlists judged as a whole: secret-shaped lines generated from the built-in
//! rules' own regexes (never from a sample file), which the built-in redactor finds; a rule
//! set whose allowlists and stopwords together keep more than [`MAX_KEPT_PER_MILLE`] of them
//! is one that switches redaction off, whatever each entry looks like alone.
//!
//! Each rule's regex is parsed, its assertions (`^`, `$`, `\b`) dropped, and sampled
//! [`PER_RULE`] times from a generator seeded with a constant ([`rand_regex`]), so the set is
//! the same on every run. Each sample is tried as it is and inside an ordinary line of
//! configuration (`"key": "…",`), so a line-target allowlist of everyday punctuation is
//! caught too. Only the lines the built-in redactor finds something in count.

use rand::SeedableRng;
use rand::distr::Distribution;
use rand::rngs::Xoshiro256PlusPlus;
use regex_syntax::hir::{Capture, Hir, HirKind, Repetition};

use super::Redactor;

/// Samples drawn from each rule's regex.
pub const PER_RULE: usize = 6;
/// The most (per thousand) of the probes a user's allowlists may keep from redaction.
pub const MAX_KEPT_PER_MILLE: usize = 10;
/// Extra repeats a `*`, `+` or `{n,}` may take when sampled.
const MAX_REPEAT: u32 = 8;

/// The probe lines and how many secrets the built-in redactor finds in each.
pub struct Probes {
    lines: Vec<(String, usize)>,
}

impl Probes {
    /// Lines sampled from `patterns` that `redactor` finds secrets in.
    pub fn generate<'a>(patterns: impl IntoIterator<Item = &'a str>, redactor: &Redactor) -> Self {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x5eed_f00d_cafe_d00d);
        let mut lines = Vec::new();
        for pattern in patterns {
            let Some(sampler) = sampler(pattern) else {
                continue;
            };
            let mut drawn = 0;
            // Bytes that are not UTF-8 (a class of any byte) are drawn again, a few times.
            for _ in 0..PER_RULE * 4 {
                if drawn == PER_RULE {
                    break;
                }
                let bytes: Vec<u8> = sampler.sample(&mut rng);
                let Ok(sample) = String::from_utf8(bytes) else {
                    continue;
                };
                drawn += 1;
                let escaped = sample.replace('\\', "\\\\").replace('"', "\\\"");
                for line in [sample.clone(), format!("  \"value\": \"{escaped}\",")] {
                    let found = redactor.scan(&line).len();
                    if found > 0 {
                        lines.push((line, found));
                    }
                }
            }
        }
        Self { lines }
    }

    /// How many probe lines there are.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// How many probe lines `redactor` leaves a secret in that the built-in one found.
    pub fn kept_by(&self, redactor: &Redactor) -> usize {
        self.lines
            .iter()
            .filter(|(line, found)| redactor.scan(line).len() < *found)
            .count()
    }

    /// Whether `kept` of them is past [`MAX_KEPT_PER_MILLE`].
    pub fn too_many(&self, kept: usize) -> bool {
        kept * 1000 > self.lines.len() * MAX_KEPT_PER_MILLE
    }
}

/// A sampler of `pattern` with its assertions dropped; `None` when it does not parse.
fn sampler(pattern: &str) -> Option<rand_regex::Regex> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    rand_regex::Regex::with_hir(without_looks(hir), MAX_REPEAT).ok()
}

/// `hir` with every assertion (`^`, `$`, `\b`, …) made empty: what is sampled is the text.
fn without_looks(hir: Hir) -> Hir {
    match hir.into_kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Capture(c) => Hir::capture(Capture {
            sub: Box::new(without_looks(*c.sub)),
            ..c
        }),
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(without_looks(*r.sub)),
            ..r
        }),
        HirKind::Concat(hs) => Hir::concat(hs.into_iter().map(without_looks).collect()),
        HirKind::Alternation(hs) => Hir::alternation(hs.into_iter().map(without_looks).collect()),
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(l) => Hir::literal(l.0),
        HirKind::Class(c) => Hir::class(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assertions_are_dropped_and_the_rest_sampled() {
        let s = sampler(r"\bghp_[0-9a-zA-Z]{36}\b$").unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let got: Vec<u8> = s.sample(&mut rng);
        let got = String::from_utf8(got).unwrap();
        assert!(
            regex::Regex::new(r"^ghp_[0-9a-zA-Z]{36}$")
                .unwrap()
                .is_match(&got),
            "{got}"
        );
    }
}
