//! Redaction measured on the labelled strings of three secret scanners' test suites (gitleaks,
//! TruffleHog, detect-secrets): `../shared/fixtures/external/secrets-dev.jsonl`.
//!
//! Three figures, each with a goal: (a) the share of true positives whose every secret is gone
//! after redacting the line as the scanner's test wrote it; (b) the share of those secrets that
//! are gone when each stands alone in a neutral sentence; (c) the share of the scanners' false
//! positives whose text redaction changes at all. On a miss the test prints what was missed, by
//! source and rule.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use freecode_core::redact::redact;
use serde_json::Value;

/// Negatives that hold a real secret all the same, and stay redacted: another rule's true
/// positive (the gitleaks Cloudflare rules list each other's keys), JWTs TruffleHog cannot verify, and TruffleHog's
/// real keys with one character changed. Figure (c) is given with and without them.
const SECRET_LIKE: &[&str] = &[
    "CLOUDFLARE_ORIGIN_CA: v1.0-",
    "cloudflare_global_api_key = \"d3d1443e",
    "CLOUDFLARE_API_KEY: 5oK0U90ME14yU6CVxV90",
    "cloudflare: \"oj9Yoyq0zmOyWmPPob1aoY5Y",
    "// secret is \"a-string-secret-at-least-256-bits-long\"",
    "// Extra characters appended by a bad find-and-replace",
    "// Key was mangled when pasted from a Slack message",
    "// Truncated token accidentally committed",
    "npmtoken = '3aAcac6c?9847",
    "nugetapikey = 'hysqa?25w3",
    "rabbitmq = 'amqps://user123:pass456@?",
    "slack token - 'xoxb-65677559833?",
    "privatekey = '-----BEGIN?RSA?PRIVATE?KEY-----",
    "sendgrid = 'SG.ZV-VYwtHzJJW4wF8yPQk3.ZXg9?",
    // The Anthropic API-key rule's true positive, listed as a negative of the admin-key rule.
    "sk-ant-api03-abc123xyz-456def789ghij-klmnopqrstuvwx-3456yza789bcde-1234fghijklmnopby56aaaog",
];

/// A secret only its context identifies, not its format: short, pure hex or a UUID, lowercase
/// random characters (the generic rules' samples), a bare alphanumeric run shorter than an AWS
/// secret key, a `user:password` pair, or prose. Figure (b) counts the others.
fn context_bound(s: &str) -> bool {
    let all = |f: fn(u8) -> bool| s.bytes().all(f);
    let pair = s
        .split_once(':')
        .is_some_and(|(a, b)| !a.is_empty() && b.len() <= 24 && !b.contains(':'));
    s.len() < 16
        || s.contains(|c: char| c.is_whitespace() || "{}$%".contains(c))
        || all(|b| b.is_ascii_hexdigit() || b == b'-')
        || all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        || (s.len() < 40 && all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)))
        || pair
}

/// The floors, as this redactor reaches them on the dev set (401 of 420 in context, 196 of 212
/// alone, 21 of 167 negatives changed): gitleaks' rules as data, their secrets recognised on
/// their own where a provider's prefix names them, the random-token detector, and the
/// hand-written formats gitleaks lacks. The random-token detector is what lifts (b) from 77%
/// to 92% and (c) from 6% to 15% (13% once what a rule's allowlist keeps is left to it): the negatives it changes are random-looking tokens that one
/// scanner's rule rejects for its own format (a key one character short, a fake with a real
/// shape), which no rule without that provider's format can tell from a real key. The misses
/// left (`REDACT_REPORT=1 cargo test -p freecode-core --test redact_scanners -- --nocapture`
/// lists them by source and rule) are secrets only their context names, or labels a general
/// rule would have to memorise: masks (`AKCxxxxxxxxxx`, `mongodb://xxxx:xxxxx@`,
/// `username:password`), a key block whose body is prose, UUIDs and hosts labelled as secrets,
/// and keys that are not secret words (`secrete[]`, `railway`).
///
/// Since the truth labels (`the_labelled_dev_set_figures`), values made up by hand (runs and
/// repeats: `abcd1234abcd1234…`, `AKIAZZZZZZZZZZZZZZZZ`, `12345678-ABCD-ABCD-…`) are left
/// alone: the scanners' tests count them as true positives of their rules, a transcript's
/// reader as placeholders. That took (a) from 95% to 84% and (b) from 92% to 81% here, and
/// the labelled benign lines changed from 30.6% to 5.4%, with the labelled secrets in context
/// unchanged. These floors are the scanners' view, kept so that a change is seen.
const IN_CONTEXT: f64 = 0.83;
const ALONE_SHARE: f64 = 0.80;
/// Share of negatives (less [`SECRET_LIKE`]) that may change.
const NEGATIVES: f64 = 0.13;

/// Neutral sentences a secret is put alone into for figure (b).
const ALONE: &[&str] = &[
    "I pasted {} here by mistake",
    "the value was {} yesterday",
    "{}",
];

struct Row {
    source: String,
    rule: String,
    tp: bool,
    text: String,
    secrets: Vec<String>,
}

/// The lines of a JSON Lines file of the external fixtures, parsed.
fn jsonl(name: &str) -> Vec<Value> {
    let path = freecode_testkit::external_fixtures().join(name);
    let data = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    data.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1))
        })
        .collect()
}

/// A line's `secrets`: the strings of its array.
fn secrets_of(v: &Value) -> Vec<String> {
    v["secrets"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn rows() -> Vec<Row> {
    jsonl("secrets-dev.jsonl")
        .iter()
        .map(|v| {
            let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
            Row {
                source: s("source"),
                rule: s("rule"),
                tp: v["kind"] == "tp",
                text: s("text"),
                secrets: secrets_of(v),
            }
        })
        .collect()
}

fn short(s: &str) -> String {
    let s = s.replace('\n', "\\n");
    if s.chars().count() > 110 {
        format!("{}…", s.chars().take(110).collect::<String>())
    } else {
        s
    }
}

struct Figure {
    hit: usize,
    total: usize,
    misses: BTreeMap<String, Vec<String>>,
}

impl Figure {
    fn new() -> Self {
        Self {
            hit: 0,
            total: 0,
            misses: BTreeMap::new(),
        }
    }

    fn count(&mut self, ok: bool, row: &Row, what: &str) {
        self.total += 1;
        if ok {
            self.hit += 1;
        } else {
            self.misses
                .entry(format!("{}/{}", row.source, row.rule))
                .or_default()
                .push(short(what));
        }
    }

    fn share(&self) -> f64 {
        self.hit as f64 / self.total.max(1) as f64
    }

    fn report(&self, name: &str) -> String {
        let mut out = format!(
            "{name}: {}/{} = {:.1}%\n",
            self.hit,
            self.total,
            100.0 * self.share()
        );
        for (rule, texts) in &self.misses {
            for t in texts {
                out.push_str(&format!("    {rule}: {t}\n"));
            }
        }
        out
    }
}

fn survives(out: &str, secrets: &[String]) -> bool {
    secrets.iter().any(|s| out.contains(s.as_str()))
}

#[test]
fn scanner_test_strings_meet_the_goals() {
    let rows = rows();
    assert!(rows.len() > 500, "the dev set has {} rows", rows.len());
    let mut context = Figure::new();
    let mut alone = Figure::new();
    let mut negatives = Figure::new();
    let mut all_negatives = Figure::new();
    let mut bound = 0;
    for row in &rows {
        if row.tp {
            let secrets: Vec<String> = row
                .secrets
                .iter()
                .filter(|s| !s.is_empty())
                .cloned()
                .collect();
            if secrets.is_empty() {
                continue;
            }
            let (out, _) = redact(&row.text);
            context.count(!survives(&out, &secrets), row, &row.text);
            for s in &secrets {
                if context_bound(s) {
                    bound += 1;
                    continue;
                }
                let ok = ALONE.iter().all(|t| {
                    let text = t.replace("{}", s);
                    !redact(&text).0.contains(s.as_str())
                });
                alone.count(ok, row, s);
            }
        } else {
            let (out, _) = redact(&row.text);
            // Counted as "left alone" when unchanged.
            all_negatives.count(out == row.text, row, &row.text);
            if !SECRET_LIKE.iter().any(|m| row.text.contains(m)) {
                negatives.count(out == row.text, row, &row.text);
            }
        }
    }
    let changed = 1.0 - negatives.share();
    let summary = format!(
        "(a) in context: {:.1}% of {}\n(b) alone: {:.1}% of {} known-format secrets ({bound} \
         context-bound ones left out)\n(c) negatives changed: {:.1}% of {} ({:.1}% of all {})\n",
        100.0 * context.share(),
        context.total,
        100.0 * alone.share(),
        alone.total,
        100.0 * changed,
        negatives.total,
        100.0 * (1.0 - all_negatives.share()),
        all_negatives.total,
    );
    println!("{summary}");
    let report = format!(
        "{summary}{}{}{}",
        context.report("(a) in context"),
        alone.report("(b) alone"),
        negatives.report("(c) negatives left alone"),
    );
    // `REDACT_REPORT=1 cargo test … -- --nocapture` lists every miss even when the floors hold.
    if std::env::var_os("REDACT_REPORT").is_some() {
        println!("{report}");
    }
    assert!(
        context.share() >= IN_CONTEXT && alone.share() >= ALONE_SHARE && changed <= NEGATIVES,
        "floors: (a) >= {IN_CONTEXT}, (b) >= {ALONE_SHARE}, (c) <= {NEGATIVES} changed\n{report}"
    );
}

/// One line's truth label (`secrets-dev.labels.jsonl`, see `secrets-dev.LABELS.md` beside it):
/// what a redactor of shared transcripts should remove, whatever one scanner's rule says.
struct Label {
    /// The corpus line it labels, from 1.
    line: u64,
    truth: String,
    secrets: Vec<String>,
}

fn labels() -> Vec<Label> {
    jsonl("secrets-dev.labels.jsonl")
        .iter()
        .map(|v| Label {
            line: v["line"].as_u64().unwrap_or_default(),
            truth: v["truth"].as_str().unwrap_or_default().to_owned(),
            secrets: secrets_of(v),
        })
        .collect()
}

/// A hex hash or a UUID: a secret of that shape is told by its context alone, so it is not
/// counted standing alone (figure b of the labels).
fn hash_or_uuid(s: &str) -> bool {
    let hex = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = s.split('-').collect();
    hex(s) || (parts.len() == 5 && parts.iter().all(|p| hex(p)) && s.len() == 36)
}

/// The dev set judged by its truth labels (ambiguous lines left out): (a) secret lines whose
/// every labelled value is gone, redacted as written; (b) labelled values that are not a hex
/// hash or a UUID, gone when each stands alone in a sentence; (c) benign lines changed at all.
/// Prints the figures and what is missed (`REDACT_REPORT=1 … -- --nocapture`); the floors are
/// today's figures, so a change that loses ground fails.
#[test]
fn the_labelled_dev_set_figures() {
    let rows = rows();
    let labels = labels();
    assert_eq!(rows.len(), labels.len(), "one label a line");
    assert!(
        labels
            .iter()
            .enumerate()
            .all(|(n, l)| l.line == n as u64 + 1),
        "labels in the corpus's order"
    );
    let (mut context, mut alone, mut benign) = (Figure::new(), Figure::new(), Figure::new());
    for (row, label) in rows.iter().zip(&labels) {
        let (out, _) = redact(&row.text);
        match label.truth.as_str() {
            "secret" if !label.secrets.is_empty() => {
                context.count(!survives(&out, &label.secrets), row, &row.text);
                for s in label.secrets.iter().filter(|s| !hash_or_uuid(s)) {
                    let ok = ALONE.iter().all(|t| {
                        let text = t.replace("{}", s);
                        !redact(&text).0.contains(s.as_str())
                    });
                    alone.count(ok, row, s);
                }
            }
            "benign" => benign.count(out == row.text, row, &row.text),
            _ => {}
        }
    }
    let changed = 1.0 - benign.share();
    let summary = format!(
        "labelled (a) in context: {:.1}% of {} secret lines\nlabelled (b) alone: {:.1}% of {} \
         values (hex hashes and UUIDs left out)\nlabelled (c) benign changed: {:.1}% of {}\n",
        100.0 * context.share(),
        context.total,
        100.0 * alone.share(),
        alone.total,
        100.0 * changed,
        benign.total,
    );
    println!("{summary}");
    let report = format!(
        "{summary}{}{}{}",
        context.report("labelled (a) in context"),
        alone.report("labelled (b) alone"),
        benign.report("labelled (c) benign left alone"),
    );
    if std::env::var_os("REDACT_REPORT").is_some() {
        println!("{report}");
    }
    assert!(
        context.share() >= LABELLED_IN_CONTEXT
            && alone.share() >= LABELLED_ALONE
            && changed <= LABELLED_BENIGN,
        "floors: (a) >= {LABELLED_IN_CONTEXT}, (b) >= {LABELLED_ALONE}, (c) <= {LABELLED_BENIGN}\n{report}"
    );
}

/// The labelled figures' floors: today's (`cargo test -p freecode-core --test redact_scanners
/// labelled -- --nocapture` prints them: 95.5% of 356 in context, 65.6% of 346 alone, 5.4% of
/// 186 benign changed). The goals are 98%, 90% and 10%: (b) misses are mostly lowercase
/// letters and digits standing alone (gitleaks' generated samples), a shape ordinary ids and
/// names share; see the issue 42 note.
const LABELLED_IN_CONTEXT: f64 = 0.95;
const LABELLED_ALONE: f64 = 0.65;
const LABELLED_BENIGN: f64 = 0.06;
