//! Assignment keys: which names hold a secret (`password`, `apiKey`, `client_secret`), how
//! strongly ([`Strength`]), from the stems of secret words and the words of an identifier.

/// How much evidence a value needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strength {
    /// The key names a secret: any value that is not a placeholder or code.
    Normal,
    /// The key's only secret word is `auth`: the value must look like a credential.
    Weak,
    /// A command-line flag value: it must look like a credential.
    Cli,
    /// A key whose only secret word is `session`: the value must be a long base64 blob.
    Blob,
    /// A key whose only secret word is a qualified `key` (`softlayer_key`, `ibm_key`): the
    /// value must look like a random token.
    KeyLike,
}

/// Words that are secrets by themselves, or as the end of a word (`dbpassword`).
pub(super) const SECRET_STEMS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "secretkey",
    "credential",
    "credentials",
];

/// Words that, before the secret word, say the value is not a secret (`publicToken`).
pub(super) const NOT_SECRET_WORDS: &[&str] =
    &["public", "publishable", "not", "non", "fake", "dummy"];

/// Qualifiers of `key` that make it a data-structure key, not a secret (`cache_key`).
pub(super) const NON_SECRET_KEY_QUALIFIERS: &[&str] = &[
    "cache",
    "primary",
    "foreign",
    "sort",
    "partition",
    "public",
    "pub",
    "hash",
    "object",
    "lookup",
    "idempotency",
    "row",
    "map",
    "dict",
    "unique",
    "composite",
    "shard",
    "routing",
    "dedup",
    "group",
    "sequence",
    "bucket",
    "translation",
    "i18n",
    "react",
    "index",
    "search",
    "cursor",
    "next",
    "page",
    "event",
    "state",
    "config",
    "metric",
    "label",
    "column",
    "field",
    "json",
    "yaml",
    "env",
    "host",
    "ssh",
    "gpg",
    "pgp",
];

/// Words that make a following `key` a secret (`API_KEY`, `signing_key`).
pub(super) const KEY_QUALIFIERS: &[&str] = &[
    "api",
    "access",
    "private",
    "secret",
    "client",
    "signing",
    "encryption",
    "master",
    "hmac",
    "jwt",
    "session",
    "license",
    "app",
];

/// Words that, after the secret word, say the value is *about* the secret, not the secret.
pub(super) const META_WORDS: &[&str] = &[
    "length",
    "len",
    "min",
    "max",
    "minimum",
    "maximum",
    "ttl",
    "timeout",
    "expiry",
    "expires",
    "expiration",
    "expire",
    "lifetime",
    "age",
    "count",
    "limit",
    "limits",
    "size",
    "file",
    "files",
    "path",
    "dir",
    "directory",
    "url",
    "uri",
    "urls",
    "endpoint",
    "host",
    "hostname",
    "port",
    "name",
    "names",
    "type",
    "kind",
    "id",
    "ids",
    "enabled",
    "enable",
    "disabled",
    "disable",
    "required",
    "header",
    "prefix",
    "suffix",
    "field",
    "env",
    "var",
    "variable",
    "provider",
    "manager",
    "method",
    "mode",
    "algorithm",
    "alg",
    "format",
    "encoding",
    "version",
    "usage",
    "budget",
    "rate",
    "param",
    "parameter",
    "policy",
    "rotation",
    "hint",
    "label",
    "description",
    "location",
    "region",
    "arn",
    "ref",
    "sock",
    "socket",
    "stdin",
    "store",
    "vault",
    "helper",
    "command",
    "cmd",
    "flag",
    "option",
    "options",
    "regex",
    "pattern",
    "validation",
    "validator",
    "strength",
    "schema",
    "scheme",
    "strategy",
    "backend",
    "server",
    "service",
    "domain",
    "issuer",
    "audience",
    "scope",
    "scopes",
    "realm",
    "callback",
    "redirect",
    "flow",
    "level",
    "interval",
    "duration",
    "seconds",
    "secs",
    "ms",
    "at",
    "date",
    "time",
    "timestamp",
    "created",
    "updated",
    "changed",
    "index",
    "idx",
    "valid",
    "set",
    "source",
    "cache",
    "fingerprint",
    "log",
    "prompt",
    "placeholder",
    "message",
    "msg",
    "error",
    "text",
    "title",
    "help",
    "response",
    "request",
    "result",
    "handler",
    "client",
    "builder",
    "parser",
    "start",
    "end",
    "tree",
    "stream",
];

/// The words of an ASCII identifier, split on non-alphanumerics and camelCase (`APIKey` →
/// `API`, `Key`), in their original case.
pub(super) fn words(ident: &str) -> Vec<&str> {
    let b = ident.as_bytes();
    let mut out = Vec::new();
    let mut start = None;
    for i in 0..b.len() {
        let c = b[i];
        if !c.is_ascii_alphanumeric() {
            if let Some(s) = start.take() {
                out.push(&ident[s..i]);
            }
            continue;
        }
        if let Some(s) = start
            && c.is_ascii_uppercase()
        {
            let prev = b[i - 1];
            let next_lower = b.get(i + 1).is_some_and(u8::is_ascii_lowercase);
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push(&ident[s..i]);
                start = Some(i);
            }
        }
        if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(&ident[s..]);
    }
    out
}

pub(super) fn ends_with_ci(word: &str, suffix: &str) -> bool {
    let (w, s) = (word.as_bytes(), suffix.as_bytes());
    w.len() >= s.len() && w[w.len() - s.len()..].eq_ignore_ascii_case(s)
}

pub(super) fn in_ci(list: &[&str], word: &str) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
}

/// Whether word `i` of `words` is a secret word, and how strong.
pub(super) fn secret_word(words: &[&str], i: usize) -> Option<Strength> {
    let w = words[i];
    if SECRET_STEMS.iter().any(|s| ends_with_ci(w, s)) {
        return Some(Strength::Normal);
    }
    // `DB_PASS`, `smtp_pwd`; not `PASS` alone (test output), `PWD` (the working directory) or
    // `pass_through`, `needless_pass_by_value`.
    if (w.eq_ignore_ascii_case("pass")
        || w.eq_ignore_ascii_case("pwd")
        || w.eq_ignore_ascii_case("pw"))
        && words.len() > 1
        && i == words.len() - 1
    {
        return Some(Strength::Normal);
    }
    if w.eq_ignore_ascii_case("key") && i > 0 && in_ci(KEY_QUALIFIERS, words[i - 1]) {
        return Some(Strength::Normal);
    }
    // SonarQube's scanner takes its token as `sonar.login` (`SONAR_LOGIN`).
    if w.eq_ignore_ascii_case("login") && i > 0 && words[i - 1].eq_ignore_ascii_case("sonar") {
        return Some(Strength::Normal);
    }
    // A session token (`session:` in an AWS credentials block): a long base64 blob only.
    if w.eq_ignore_ascii_case("session") && i == words.len() - 1 {
        return Some(Strength::Blob);
    }
    w.eq_ignore_ascii_case("auth").then_some(Strength::Weak)
}

/// Whether an assignment key (or flag name) names a secret, and how strong the evidence is.
pub(super) fn classify_key(key: &str) -> Option<Strength> {
    // Bundler's credentials for a gem server: `BUNDLE_GEMS__EXAMPLE__COM=user:password`.
    if key.starts_with("BUNDLE_") && key.contains("__") {
        return Some(Strength::Normal);
    }
    let words = words(key);
    let mut last = None;
    let mut strength = None;
    for i in 0..words.len() {
        if let Some(s) = secret_word(&words, i) {
            last = Some(i);
            strength = match (strength, s) {
                (_, Strength::Normal) | (Some(Strength::Normal), _) => Some(Strength::Normal),
                (Some(Strength::Weak), _) | (_, Strength::Weak) => Some(Strength::Weak),
                _ => Some(s),
            };
        }
    }
    let strength = strength.unwrap_or(Strength::Weak);
    let Some(last) = last else {
        // `softlayer_key`, `ibm-cloud-key`: a qualified `key` at the end, for random values only.
        let n = words.len();
        return (n > 1
            && words[n - 1].eq_ignore_ascii_case("key")
            && !in_ci(NON_SECRET_KEY_QUALIFIERS, words[n - 2]))
        .then_some(Strength::KeyLike);
    };
    if words[last + 1..].iter().any(|w| in_ci(META_WORDS, w)) {
        return None;
    }
    // `publicToken`, `not_secret`, `fake_password`: not a secret by its own name.
    if words[..last].iter().any(|w| in_ci(NOT_SECRET_WORDS, w)) {
        return None;
    }
    Some(strength)
}
