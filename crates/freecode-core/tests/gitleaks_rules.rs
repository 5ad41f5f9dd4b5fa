//! gitleaks' rules, each on its own, against the development set's strings from gitleaks' own
//! tests (`../shared/fixtures/external/secrets-dev.jsonl`, source `gitleaks`): a rule finds the
//! secrets of its true positives (in their text, or standing alone where the rule's secret has a
//! provider's prefix) and leaves its false positives alone, as gitleaks' own `validate` runs a
//! rule. A rule this engine reads differently from gitleaks fails here by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use freecode_core::redact::gitleaks::{Hit, RuleSet};
use serde_json::Value;

fn rows() -> Vec<Value> {
    let path = freecode_testkit::external_fixtures().join("secrets-dev.jsonl");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["source"] == "gitleaks")
        .collect()
}

fn found(set: &RuleSet, text: &str) -> Vec<String> {
    let mut hits: Vec<Hit> = Vec::new();
    set.find(text, &mut hits);
    hits.iter()
        .map(|h| text[h.secret.clone()].to_owned())
        .collect()
}

#[test]
fn each_rule_catches_its_own_true_positives_and_leaves_its_false_ones() {
    let all = RuleSet::builtin();
    let mut checked = 0;
    let mut rules = BTreeMap::<String, usize>::new();
    let mut failures = Vec::new();
    for row in rows() {
        let id = row["rule"].as_str().unwrap();
        // Rules freecode leaves to its own detectors (rules/freecode.toml), or for files only.
        let Some(one) = all.only(id) else { continue };
        let text = row["text"].as_str().unwrap();
        let got = found(&one, text);
        *rules.entry(id.to_owned()).or_default() += 1;
        checked += 1;
        if row["kind"] == "tp" {
            for secret in row["secrets"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
            {
                // As gitleaks' `validate` asks: a finding of the secret (the labels sometimes
                // carry a quote, or more than the rule's regex can match).
                let secret = secret.trim_matches(|c| matches!(c, '\'' | '"' | '`'));
                let caught = got
                    .iter()
                    .any(|g| g.contains(secret) || secret.contains(g.as_str()));
                if !secret.is_empty() && !caught {
                    failures.push(format!(
                        "{id}: missed {secret:?} in {text:?} (found {got:?})"
                    ));
                }
            }
        } else if !got.is_empty() {
            failures.push(format!("{id}: flagged {got:?} in its negative {text:?}"));
        }
    }
    println!("{checked} strings of {} rules checked", rules.len());
    assert!(
        rules.len() > 100 && checked > 300,
        "{} rules, {checked} strings",
        rules.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
