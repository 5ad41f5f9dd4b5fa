//! Unit tests of the redaction module's parts: words of identifiers, assignment keys and
//! values, the detectors' windows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::keys::words;
use super::values::{is_placeholder, misnested_brackets};
use super::*;

#[test]
fn words_split_like_identifiers() {
    assert_eq!(words("OPENAI_API_KEY"), ["OPENAI", "API", "KEY"]);
    assert_eq!(words("apiKey"), ["api", "Key"]);
    assert_eq!(words("APIKey"), ["API", "Key"]);
    assert_eq!(words("_authToken"), ["auth", "Token"]);
    assert_eq!(
        words("spring.datasource.password"),
        ["spring", "datasource", "password"]
    );
    assert_eq!(words("oauth2Token"), ["oauth2", "Token"]);
    assert_eq!(words("x-api-key"), ["x", "api", "key"]);
}

#[test]
fn context_words_and_bracket_passwords() {
    assert_eq!(classify_key("sonar.login"), Some(Strength::Normal));
    assert_eq!(classify_key("SONAR_LOGIN"), Some(Strength::Normal));
    assert_eq!(classify_key("login"), None);
    assert_eq!(classify_key("session"), Some(Strength::Blob));
    assert_eq!(classify_key("session_id"), None);
    assert_eq!(classify_key("session_token"), Some(Strength::Normal));
    assert!(misnested_brackets("m{{h}o)p${e]"));
    assert!(!misnested_brackets("getToken("));
    assert!(!misnested_brackets("cache[key](x)"));
}

#[test]
fn keys_are_classified() {
    for key in [
        "PASSWORD",
        "DB_PASSWORD",
        "db_pass",
        "GITHUB_TOKEN",
        "api_key",
        "apiKey",
        "APIKEY",
        "AWS_SECRET_ACCESS_KEY",
        "client_secret",
        "PRIVATE_KEY",
        "access_token",
        "SECRET_KEY_BASE",
        "x-api-key",
        "PRIVATE-TOKEN",
        "_authToken",
        "passphrase",
        "AUTH_TOKEN",
    ] {
        assert_eq!(classify_key(key), Some(Strength::Normal), "{key}");
    }
    assert_eq!(classify_key("auth"), Some(Strength::Weak));
    assert_eq!(classify_key("NPM_AUTH"), Some(Strength::Weak));
    for key in [
        "PASSWORD_MIN_LENGTH",
        "MIN_PASSWORD_LENGTH",
        "max_tokens",
        "input_tokens",
        "tokenizer",
        "author",
        "Authorization",
        "TOKEN_URL",
        "SECRET_NAME",
        "AWS_ACCESS_KEY_ID",
        "token_type",
        "SSH_AUTH_SOCK",
        "PASS",
        "PWD",
        "OLDPWD",
        "cache_key",
        "key",
        "secrets",
        "api_key_name",
        "GIT_ASKPASS",
        "PASSWORD_FILE",
    ] {
        assert_eq!(classify_key(key), None, "{key}");
    }
}

#[test]
fn placeholders() {
    for v in [
        "${TOKEN}",
        "$TOKEN",
        "$token",
        "<your-token>",
        "xxx",
        "***",
        "your_api_key_here",
        "YOUR_TOKEN",
        "{{ .Values.password }}",
        "$(cat /run/secrets/pw)",
        "[REDACTED:env_assignment]",
    ] {
        assert!(is_placeholder(v), "{v}");
    }
    for v in ["hunter2", "changeme", "$ecretP4ss", "yourself123"] {
        assert!(!is_placeholder(v), "{v}");
    }
}

#[test]
fn public_pem_blocks_are_left_alone_and_private_ones_are_not() {
    let body = "MIICGTCCAZ+gAwIBAgIQCeCTZaz32ci5PhwLBCou8zAKBggqhkjOPQQDAzBOMQsw\n\
                CQYDVQQGEwJVUzEXMBUGA1UEChMORGlnaUNlcnQsIEluYy4xJjAkBgNVBAMTHURp\n";
    for label in ["CERTIFICATE", "PUBLIC KEY", "PGP PUBLIC KEY BLOCK"] {
        let text = format!(" * -----BEGIN {label}-----\n{body} * -----END {label}-----\n");
        assert!(redact(&text).1.is_empty(), "{label}: {:?}", redact(&text).1);
    }
    let private = format!("-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----\n");
    assert!(!redact(&private).1.is_empty());
    // A block left open is no block: what follows is judged as usual.
    let open = format!("-----BEGIN CERTIFICATE-----\n{body}");
    assert!(!redact(&open).1.is_empty());
}

#[test]
fn values_made_up_by_hand_are_told_from_generated_ones() {
    for v in [
        "abcd1234abcd1234abcd1234abcd1234",
        "AKIAZZZZZZZZZZZZZZZZ",
        "12345678-ABCD-ABCD-ABCD-1234567890AB",
        "1234567890abcdef1234567890abcdef",
        "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ",
        "x7Kq2x7Kq2x7Kq2x7Kq2",
    ] {
        assert!(made_up(v), "{v}");
        // Whoever finds it: a provider's rule too.
        assert!(redact(&format!("token = \"{v}\"")).1.is_empty(), "{v}");
    }
    for v in [
        "ghp_Zq8rT1vXw0yB3nC5mD7fG9hJ2kL4pQ6sU8w",
        "4nbabxqo8kstr8ck5xsecb6a",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY7A9x3Qk2",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "abc123",
    ] {
        assert!(!made_up(v), "{v}");
    }
}

#[test]
fn the_anchors_keep_their_prefilter() {
    let n = Redactor::new().anchors.patterns_len();
    assert!(n <= 64, "{n} anchors: more than the packed prefilter takes");
}

#[test]
fn every_pattern_compiles() {
    let r = Redactor::new();
    assert_eq!(
        r.simple.len(),
        SIMPLE_SPECS.len() + formats::FORMAT_SPECS.len()
    );
    assert_eq!(r.run_rules.len(), formats::RUN_RULES.len());
    for (rule, _, min, max) in &r.run_rules {
        assert!(rule.anchors.is_empty() && min <= max, "{:?}", rule.regex);
    }
}

#[test]
fn the_built_in_rules_give_many_probes_the_built_in_redactor_finds() {
    let p = super::gitleaks::builtin_probes();
    assert!(p.len() > 1000, "{}", p.len());
    assert_eq!(p.kept_by(super::Redactor::global()), 0);
}
