//! Provider token formats beyond the first-party ones in the parent module: each rule is a
//! published prefix or structure (the formats gitleaks, TruffleHog and detect-secrets document),
//! with the literal anchors that gate it, a boundary class and a last check on the match.
//!
//! Rules with a distinctive literal run only on a window around a hit of one of their anchors
//! (one Aho-Corasick pass finds them all); the structural rules without a literal
//! ([`RUN_RULES`]) run only on a whole run of their byte class whose length fits.

use super::{
    SecretKind, SimpleSpec, always, has_both_cases, has_digit, has_digit_and_letter, is_alnum,
    is_token_byte, is_word,
};

/// A byte that cannot surround a base64 token (`=` included: padding belongs to the token).
fn is_b64_or_pad(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// A token byte or a dot: `.ico-…` in a file name is not an Infracost token.
fn is_token_or_dot(b: u8) -> bool {
    is_token_byte(b) || b == b'.'
}

/// Bits of Shannon entropy per character.
pub(super) fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
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

fn random_mixed(s: &str) -> bool {
    has_digit(s) && has_both_cases(s)
}

/// An AWS secret access key standing alone: exactly 40 base64 characters with digits, both
/// cases and the entropy of random data (a path or a word list of that length has less).
fn aws_secret_alone(s: &str) -> bool {
    s.len() == 40
        && random_mixed(s)
        && s.bytes().filter(u8::is_ascii_uppercase).count() >= 4
        && s.bytes().filter(u8::is_ascii_digit).count() >= 2
        && !s.contains("//")
        && entropy(s) >= 4.3
}

/// A 64-byte key in base64 (Azure storage and Cosmos DB account keys): 86 characters and `==`.
fn base64_key_64(s: &str) -> bool {
    s.len() == 88 && random_mixed(&s[..86]) && entropy(&s[..86]) >= 4.8
}

/// A Google API key that is not a made-up sequence (`AIzaSyabcdefgh…`, `AIzaaaaa…`).
pub(super) fn google_key(s: &str) -> bool {
    let body = s.get(4..).unwrap_or_default();
    let b = body.as_bytes();
    let ascending = b.windows(8).any(|w| w.windows(2).all(|p| p[1] == p[0] + 1));
    let repeated = b.windows(8).any(|w| w.iter().all(|&c| c == w[0]));
    !ascending && !repeated
}

/// A Discord bot token's first part is the bot's id in base64: it must carry digits and letters.
fn discord_token(s: &str) -> bool {
    s.split('.').all(|p| !p.is_empty()) && has_digit_and_letter(s) && entropy(s) >= 4.0
}

/// Lowercase hex of a fixed-format key that is not all one digit.
fn hex_not_constant(s: &str) -> bool {
    entropy(s) >= 2.5
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
        anchors: &["ABSK", "bedrock-api-key-"],
        pattern: r"ABSK[A-Za-z0-9+/]{109,269}={0,2}|bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t[A-Za-z0-9+/=%&]*",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::AzureKey,
        anchors: &["Q~"],
        pattern: r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit_and_letter,
    },
    SimpleSpec {
        kind: SecretKind::AzureKey,
        anchors: &["Key=", "key=", "KEY="],
        pattern: r"(?i-u:AccountKey|SharedAccessKey|PrimaryKey|SecondaryKey)=([A-Za-z0-9+/=]{20,})",
        group: 1,
        boundary: None,
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::AzureKey,
        anchors: &["+ACR"],
        // 52 characters: 42, `+ACR`, 6.
        pattern: r"[A-Za-z0-9+/]{42}\+ACR[A-Za-z0-9]{6}",
        group: 0,
        boundary: Some(is_b64_or_pad),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        // ClickHouse Cloud API secret key.
        anchors: &["4b1d"],
        pattern: r"4b1d[A-Za-z0-9]{38}",
        group: 0,
        boundary: Some(is_alnum),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["LTAI"],
        pattern: r"LTAI[A-Za-z0-9]{20}",
        group: 0,
        boundary: Some(is_alnum),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["AQVN", "t1."],
        pattern: r"AQVN[A-Za-z0-9_-]{35,38}|t1\.[A-Z0-9a-z_-]+={0,2}\.[A-Z0-9a-z_-]{86}={0,2}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["doo_v1_", "dop_v1_", "dor_v1_"],
        pattern: r"do[opr]_v1_[a-f0-9]{64}",
        group: 0,
        boundary: Some(is_word),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["v1.0-"],
        pattern: r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["cfk_", "cfut_", "cfat_"],
        pattern: r"cf(?:k|ut|at)_[A-Za-z0-9]{40,}",
        group: 0,
        boundary: Some(is_word),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["HRKU-"],
        pattern: r"HRKU-AA[0-9A-Za-z_-]{58}",
        group: 0,
        boundary: Some(is_token_byte),
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
        anchors: &["sha256~"],
        pattern: r"sha256~[A-Za-z0-9_-]{43}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["dapi"],
        pattern: r"dapi[a-f0-9]{32}(?:-[0-9])?",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit_and_letter,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["dt0c01."],
        pattern: r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    // ---- source hosting, CI, registries ----------------------------------------------------
    SimpleSpec {
        kind: SecretKind::GitlabToken,
        anchors: &[
            "glft-",
            "glimt-",
            "glagent-",
            "glcbt-",
            "glwt-",
            "glrtr-",
            "GR1348941",
        ],
        pattern: r"gl(?:ft|imt|agent|cbt|wt|rtr)-[A-Za-z0-9_-]{20,}|GR1348941[A-Za-z0-9_-]{20}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["AKCp", "cmVmdGtu"],
        pattern: r"AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56}",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &[
            "bkua_",
            "dckr_pat_",
            "CLOJARS_",
            "rubygems_",
            "pnu_",
            "pul-",
            "rdme_",
        ],
        pattern: concat!(
            r"bkua_[a-f0-9]{40}|dckr_pat_[A-Za-z0-9_-]{27}|CLOJARS_[a-z0-9]{60}",
            r"|rubygems_[a-f0-9]{48}|pnu_[A-Za-z0-9]{36}|pul-[a-f0-9]{40}|rdme_[a-z0-9]{70}"
        ),
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["sgp_"],
        pattern: r"sgp_(?:[a-fA-F0-9]{16}|local)_[a-fA-F0-9]{40}|sgp_[a-fA-F0-9]{40}",
        group: 0,
        boundary: Some(is_word),
        validate: hex_entropy_3,
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
        anchors: &["PMAK-"],
        pattern: r"PMAK-[A-Za-z0-9-]{40,}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["API-"],
        pattern: r"API-[A-Z0-9]{26}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["atlasv1."],
        pattern: r"[a-z0-9]{14}\.atlasv1\.[a-z0-9_=-]{60,70}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["hvs.", "hvb.", "hvr."],
        pattern: r"hv[sbr]\.[A-Za-z0-9_-]{24,}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: random_lower_digits,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["dp."],
        pattern: r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["pat.", "sat."],
        pattern: r"(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}",
        group: 0,
        boundary: Some(is_token_byte),
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
        anchors: &["tskey-"],
        pattern: r"tskey-[a-z]+-[A-Za-z0-9_-]{40,}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    // ---- messaging, payments, SaaS ---------------------------------------------------------
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["SG."],
        pattern: r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}|SG\.[A-Za-z0-9=_.-]{66}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit_and_letter,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["xkeysib-"],
        pattern: r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["shpat_", "shpca_", "shppa_", "shpss_"],
        pattern: r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        group: 0,
        boundary: Some(is_word),
        validate: always,
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
        anchors: &["key-", "pubkey-"],
        pattern: r"(?:pub)?key-[a-f0-9]{32}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit_and_letter,
    },
    SimpleSpec {
        kind: SecretKind::StripeKey,
        anchors: &["k_prod_"],
        pattern: r"[sr]k_prod_[A-Za-z0-9]{10,99}",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["shippo_"],
        pattern: r"shippo_(?:live|test)_[a-fA-F0-9]{40}",
        group: 0,
        boundary: Some(is_word),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["EZAK", "EZTK"],
        pattern: r"EZ[AT]K[A-Za-z0-9]{54}",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["EAAM", "EAAC"],
        pattern: r"EAA[MC][A-Za-z0-9]{100,}",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["AAAAAAAAAAAAAAAAAAAA"],
        pattern: r"A{22}[A-Za-z0-9%]{80,}",
        group: 0,
        boundary: Some(is_alnum),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["sm_aat_", "sm_pat_", "sm_sat_"],
        pattern: r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["s-s4t2"],
        pattern: r"s-s4t2(?:ud|af)-[a-f0-9]{64}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["ico-"],
        pattern: r"ico-[A-Za-z0-9]{32}",
        group: 0,
        boundary: Some(is_token_or_dot),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["ntn_", "secret_", "lin_api_", "nfp_"],
        pattern: r"ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43}|lin_api_[A-Za-z0-9]{40}|nfp_[A-Za-z0-9]{36}",
        group: 0,
        boundary: Some(is_word),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["pscale_"],
        pattern: r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,64}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["NRAK-", "NRJS-", "NRII-", "NRRA-", "NRAA-"],
        pattern: r"NRAK-[A-Za-z0-9]{27}|NRJS-[a-f0-9]{19}|NRII-[A-Za-z0-9-]{32}|NRRA-[a-f0-9]{42}|NRAA-[a-f0-9]{27}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["glc_", "glsa_", "eyJrIjoi"],
        pattern: r"glc_[A-Za-z0-9+/]{32,400}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|eyJrIjoi[A-Za-z0-9]{70,400}={0,2}",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["sntrys_", "sntryu_"],
        pattern: r"sntrys_eyJ[A-Za-z0-9+/=_-]{60,}|sntryu_[a-f0-9]{64}",
        group: 0,
        boundary: Some(is_word),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["ops_eyJ"],
        pattern: r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}",
        group: 0,
        boundary: Some(is_word),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["A3-"],
        pattern: r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: one_password_key,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["AGE-SECRET-KEY-1"],
        pattern: r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
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
        // MaxMind license key: 6, `_`, 29, `_mmk`.
        anchors: &["_mmk"],
        pattern: r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk",
        group: 0,
        boundary: Some(is_word),
        validate: has_digit,
    },
    SimpleSpec {
        kind: SecretKind::ApiToken,
        // A Sumo Logic access id (`su` and 12) assigned to a key that names Sumo Logic.
        anchors: &["sumo", "Sumo", "SUMO"],
        pattern: r#"(?i:sumo)[A-Za-z0-9_.-]{0,40}["']?[ \t]*(?::|=)[ \t]*["']?(su[A-Za-z0-9]{12})"#,
        group: 1,
        boundary: Some(is_alnum),
        validate: random_mixed,
    },
    // ---- AI providers ----------------------------------------------------------------------
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["sk-or-"],
        pattern: r"sk-or-v1-[a-f0-9]{64}",
        group: 0,
        boundary: Some(is_token_byte),
        validate: always,
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
    SimpleSpec {
        kind: SecretKind::ApiToken,
        anchors: &["pcsk_"],
        pattern: r"pcsk_[A-Za-z0-9]{4,6}_[A-Za-z0-9_]{50,}",
        group: 0,
        boundary: Some(is_word),
        validate: random_mixed,
    },
    SimpleSpec {
        kind: SecretKind::HuggingFaceToken,
        anchors: &["api_org_"],
        pattern: r"api_org_[A-Za-z]{34}",
        group: 0,
        boundary: Some(is_word),
        validate: has_both_cases,
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

const CLASSES: [(RunClass, super::Boundary); 4] = [
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
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Okta API (SSWS) token: `00` and 40 more.
            pattern: r"^00[A-Za-z0-9_-]{40}$",
            group: 0,
            boundary: Some(is_token_byte),
            validate: random_mixed,
        },
        class: RunClass::Token,
        min: 42,
        max: 42,
    },
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
            kind: SecretKind::AwsSecretAccessKey,
            anchors: &[],
            pattern: r"^[A-Za-z0-9/+]{40}$",
            group: 0,
            boundary: Some(is_b64_or_pad),
            validate: aws_secret_alone,
        },
        class: RunClass::Base64,
        min: 40,
        max: 40,
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
            // ngrok auth token.
            pattern: r"^2[A-Za-z0-9]{26}_[A-Za-z0-9]{20,24}$",
            group: 0,
            boundary: Some(is_token_byte),
            validate: random_mixed,
        },
        class: RunClass::Token,
        min: 48,
        max: 52,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Mailgun webhook signing key.
            pattern: r"^[a-h0-9]{32}-[a-h0-9]{8}-[a-h0-9]{8}$",
            group: 0,
            boundary: Some(is_token_byte),
            validate: hex_not_constant,
        },
        class: RunClass::Token,
        min: 50,
        max: 50,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Twilio API key sid.
            pattern: r"^SK[0-9a-fA-F]{32}$",
            group: 0,
            boundary: Some(is_alnum),
            validate: has_digit_and_letter,
        },
        class: RunClass::Alnum,
        min: 34,
        max: 34,
    },
    RunRule {
        spec: SimpleSpec {
            kind: SecretKind::ApiToken,
            anchors: &[],
            // Yandex Cloud API key.
            pattern: r"^YC[A-Za-z0-9_-]{38}$",
            group: 0,
            boundary: Some(is_token_byte),
            validate: random_mixed,
        },
        class: RunClass::Token,
        min: 40,
        max: 40,
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

fn hex_entropy_3(s: &str) -> bool {
    entropy(s) >= 3.0
}

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
        // Not words joined into a name (`bedrock-api-key-…`).
        && !s
            .split(['-', '_'])
            .any(|w| w.len() >= 3 && w.bytes().all(|b| b.is_ascii_lowercase()))
}

/// Vault tokens: random, not a lowercase word run.
fn random_lower_digits(s: &str) -> bool {
    has_digit(s) && entropy(s) >= 3.5
}

/// A 1Password secret key with digits in it (not the `A3-XXXXXX-…` mask).
fn one_password_key(s: &str) -> bool {
    s.get(3..).is_some_and(has_digit)
}
