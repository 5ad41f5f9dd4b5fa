//! Provider token formats gitleaks' rules do not catch (the rule set in [`super::gitleaks`]
//! does the rest): each a published prefix or structure (AWS's other key id prefixes, Fly.io,
//! Square, Sonar, Atlassian, Telegram, Discord, Mailchimp, Mapbox, Google refresh tokens,
//! Gemini, xAI/Groq/Perplexity/Replicate/Tavily/LangSmith/Fireworks, Azure storage keys,
//! Airtable personal access tokens, Discord bot tokens, Twitter access tokens, 44-character
//! random keys), with the literal anchors that gate it, a boundary class and a last check on
//! the match. A rule that gitleaks' rules do as well was deleted: what stays is what only it
//! catches on the scanners' own test strings.
//!
//! Rules with a distinctive literal run only on a window around a hit of one of their anchors
//! (one Aho-Corasick pass finds them all); the structural rules without a literal
//! ([`RUN_RULES`]) run only on a whole run of their byte class whose length fits.

use super::detectors::{SimpleSpec, always};
use super::gitleaks::shannon as entropy;
use super::values::{has_both_cases, has_digit, has_digit_and_letter};
use super::{SecretKind, is_alnum, is_token_byte, is_word};

/// A byte that cannot surround a base64 token (`=` included: padding belongs to the token).
fn is_b64_or_pad(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// A token byte or a dot: `.ico-…` in a file name is not an Infracost token.
fn is_token_or_dot(b: u8) -> bool {
    is_token_byte(b) || b == b'.'
}

fn random_mixed(s: &str) -> bool {
    has_digit(s) && has_both_cases(s)
}

/// A 64-byte key in base64 (Azure storage and Cosmos DB account keys): 86 characters and `==`.
fn base64_key_64(s: &str) -> bool {
    s.len() == 88 && random_mixed(&s[..86]) && entropy(&s[..86]) >= 4.8
}

/// A Discord bot token's first part is the bot's id in base64: it must carry digits and letters.
fn discord_token(s: &str) -> bool {
    s.split('.').all(|p| !p.is_empty()) && has_digit_and_letter(s) && entropy(s) >= 4.0
}

/// The formats below, in the order they are tried; overlaps are resolved by rank and length.
pub(super) const FORMAT_SPECS: &[SimpleSpec] = &[
    // ---- cloud providers -------------------------------------------------------------------
    SimpleSpec {
        kind: SecretKind::AwsAccessKeyId,
        anchors: &[
            "A3T", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA",
        ],
        pattern: r"(?:A3T[A-Z0-9]|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["fo1_", "fm1", "fm2_"],
        pattern: r"fo1_[A-Za-z0-9_-]{43}|fm1[ar]_[A-Za-z0-9+/]{100,}={0,3}|fm2_[A-Za-z0-9+/]{64,}={0,3}",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["sq0csp-", "sq0atp-", "EAAA"],
        pattern: r"sq0(?:csp|atp)-[0-9A-Za-z_-]{16,43}|EAAA[A-Za-z0-9_-]{60}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["sqa_", "sqp_", "squ_"],
        pattern: r"sq[apu]_[A-Za-z0-9]{40}",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["ATATT", "ATCTT"],
        pattern: r"AT[AC]TT[A-Za-z0-9_=-]{40,}",
        group: 0,
        boundary: Some(is_word),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &[":A"],
        pattern: r"[0-9]{5,16}:A[A-Za-z0-9_-]{34}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["/api/webhooks/"],
        pattern: r"discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/([A-Za-z0-9_-]{60,68})",
        group: 1,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["-us"],
        pattern: r"[0-9a-f]{32}-us[0-9]{1,2}",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["pk.", "sk.", "tk."],
        pattern: r"[pst]k\.(?:eyJ[A-Za-z0-9_-]{40,}|[a-z0-9]{60})\.[A-Za-z0-9_-]{22}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        // Google OAuth refresh token (`1//0…`, as in application default credentials).
        anchors: &["1//0"],
        pattern: r"1//0[A-Za-z0-9_-]{30,}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit_and_letter,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        // Gemini (the exchange) API key: `master-` or `account-` and 20 random characters.
        anchors: &["master-", "account-"],
        pattern: r"(?:master|account)-[A-Za-z0-9]{20}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: random_tail,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["xai-", "gsk_", "pplx-", "r8_", "tvly-", "lsv2_", "fw_"],
        pattern: concat!(
            r"xai-[A-Za-z0-9]{80}|gsk_[A-Za-z0-9]{52}|pplx-[A-Za-z0-9]{48}|r8_[A-Za-z0-9]{37}",
            r"|tvly-(?:dev-|prod-)?[A-Za-z0-9]{32}|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}",
            r"|fw_[A-Za-z0-9]{24}"
        ),
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
];

/// The byte classes a structural rule's token is a maximal run of (its boundary class).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunClass {
    /// `[A-Za-z0-9+/=]`: base64 with padding.
    Base64,
    /// `[A-Za-z0-9_-]`.
    Token,
    /// `[A-Za-z0-9_.-]`.
    TokenOrDot,
    /// `[A-Za-z0-9]`.
    Alnum,
}

const CLASSES: [(RunClass, super::detectors::Boundary); 4] = [
    (RunClass::Base64, is_b64_or_pad),
    (RunClass::Token, is_token_byte),
    (RunClass::TokenOrDot, is_token_or_dot),
    (RunClass::Alnum, is_alnum),
];

/// A structural rule with no literal to gate it: it runs only on a maximal run of its class
/// whose length is in `min..=max`, so text without such runs costs one pass over its bytes.
pub(super) struct RunRule {
    pub(super) spec: SimpleSpec,
    pub(super) class: RunClass,
    pub(super) min: usize,
    pub(super) max: usize,
}

/// Shortest run any [`RUN_RULES`] rule accepts, and the longest.
const RUN_MIN: usize = 34;
const RUN_MAX: usize = 88;

/// The bytes of any [`RunClass`]: `[A-Za-z0-9+/=_.-]`.
static IN_ANY_CLASS: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'=' | b'_' | b'-' | b'.');
        b += 1;
    }
    t
};

/// Calls `f(class, start, end)` for every maximal run of each [`RunClass`] in `text` whose
/// length is between [`RUN_MIN`] and [`RUN_MAX`]. Runs longer than that (a base64 image,
/// a minified line) hold no candidate: every rule's token must be a whole run of its class.
pub(super) fn for_each_run(text: &str, mut f: impl FnMut(RunClass, usize, usize)) {
    let bytes = text.as_bytes();
    let any = |b: u8| IN_ANY_CLASS[usize::from(b)];
    let mut i = 0;
    while i < bytes.len() {
        if !any(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && any(bytes[i]) {
            i += 1;
        }
        if i - start < RUN_MIN {
            continue;
        }
        // Every class's runs inside this run of the union class.
        let run = &bytes[start..i];
        if !run.iter().any(|b| matches!(b, b'_' | b'-' | b'.')) {
            // Plain base64 (an image, most often): the base64 run is the whole run, and the
            // other classes' runs are its alphanumeric runs. One pass instead of four.
            if (RUN_MIN..=RUN_MAX).contains(&run.len()) {
                f(RunClass::Base64, start, i);
            }
            let mut j = 0;
            while j < run.len() {
                let s = j;
                while j < run.len() && run[j].is_ascii_alphanumeric() {
                    j += 1;
                }
                if (RUN_MIN..=RUN_MAX).contains(&(j - s)) {
                    for class in [RunClass::Token, RunClass::TokenOrDot, RunClass::Alnum] {
                        f(class, start + s, start + j);
                    }
                }
                j += 1;
            }
            continue;
        }
        for (class, member) in CLASSES {
            let mut j = 0;
            while j < run.len() {
                if !member(run[j]) {
                    j += 1;
                    continue;
                }
                let s = j;
                while j < run.len() && member(run[j]) {
                    j += 1;
                }
                if (RUN_MIN..=RUN_MAX).contains(&(j - s)) {
                    f(class, start + s, start + j);
                }
            }
        }
    }
}

/// Structural rules with no literal: tokens that are a whole run of their class.
pub(super) const RUN_RULES: &[RunRule] = &[
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::AzureKey,
            anchors: &[],
            // A 64-byte key in base64: Azure storage and Cosmos DB account keys.
            pattern: r"^[A-Za-z0-9+/]{86}==$",
            group: 0,
            boundary: Some(is_b64_or_pad),
            validate: base64_key_64,
        },
        class: RunClass::Base64,
        min: 88,
        max: 88,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Airtable personal access token.
            pattern: r"^pat[A-Za-z0-9]{14}\.[a-f0-9]{64}$",
            group: 0,
            boundary: Some(is_token_or_dot),
            validate: always,
        },
        class: RunClass::TokenOrDot,
        min: 82,
        max: 82,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Discord bot token: the bot id in base64, a timestamp, an HMAC.
            pattern: r"^[A-Z][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}$",
            group: 0,
            boundary: Some(is_token_or_dot),
            validate: discord_token,
        },
        class: RunClass::TokenOrDot,
        min: 59,
        max: 74,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // A 44-character random key of the base64url alphabet (IBM Cloud IAM API keys, Azure
            // DevOps personal access tokens of the older format).
            pattern: r"^[A-Za-z0-9_-]{44}$",
            group: 0,
            boundary: Some(is_token_byte),
            validate: random_key_44,
        },
        class: RunClass::Token,
        min: 44,
        max: 44,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Twitter (X) access token: the user's numeric id, `-`, a random part.
            pattern: r"^[0-9]{10,22}-[A-Za-z0-9]{20,40}$",
            group: 0,
            boundary: Some(is_token_byte),
            validate: random_tail,
        },
        class: RunClass::Token,
        min: 34,
        max: 63,
    },
];

/// A random part after a fixed prefix (`master-…`, `123…-…`): digits, both cases, and more
/// distinct characters than a word with a number.
fn random_tail(s: &str) -> bool {
    let tail = s.rsplit('-').next().unwrap_or(s);
    random_mixed(tail) && entropy(tail) >= 3.8
}

/// A 44-character key: digits, both cases, a long alphanumeric stretch (not `snake_Case_1`
/// identifiers) and no hex-only or base32 look.
fn random_key_44(s: &str) -> bool {
    let run = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::len)
        .max()
        .unwrap_or(0);
    random_mixed(s)
        && s.bytes().filter(u8::is_ascii_digit).count() >= 4
        && s.bytes().filter(u8::is_ascii_uppercase).count() >= 3
        && s.bytes().filter(u8::is_ascii_lowercase).count() >= 3
        && run >= 20
        && entropy(s) >= 3.5
        && !super::entropy::mangled_symbol(s, 0)
        // Not words joined into a name (`bedrock-api-key-…`).
        && !s
            .split(['-', '_'])
            .any(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_lowercase()))
}
