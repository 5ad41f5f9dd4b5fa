//! The structural detectors: the shapes a secret has without a key name around it (private
//! key blocks, the simple specs with their anchors, boundaries and validators), the gates that
//! let a detector run only where its literals occur, and the window of text a rule's regex runs
//! on around an anchor.

use std::ops::Range;

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use regex::Regex;

use super::values::{
    has_key_material, jwt_header_is_json, valid_loose_bearer, valid_url_password,
    valid_url_user_token,
};
use super::{Finding, SecretKind, is_alnum, is_base64_byte, is_token_byte, push};

/// The structural detectors a text's literals let run, one bit each: a detector runs only when
/// the anchors' pass found one of its literals ([`GATE_LITERALS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Gates(u16);

impl Gates {
    pub(super) const COMPARISON: Self = Self(1);
    pub(super) const XML_VALUE: Self = Self(1 << 1);
    pub(super) const AUTHORIZATION: Self = Self(1 << 2);
    pub(super) const KIND: Self = Self(1 << 3);
    pub(super) const DATA: Self = Self(1 << 4);
    pub(super) const CLI_FLAG: Self = Self(1 << 5);
    pub(super) const CLI_USER: Self = Self(1 << 6);
    pub(super) const XML_ELEMENT: Self = Self(1 << 7);
    pub(super) const PAIR: Self = Self(1 << 8);
    pub(super) const FALLBACK: Self = Self(1 << 9);
    pub(super) const PROSE: Self = Self(1 << 10);
    pub(super) const SHORT_FLAG: Self = Self(1 << 11);
    pub(super) const NETRC: Self = Self(1 << 12);

    pub(super) fn has(self, g: Self) -> bool {
        self.0 & g.0 != 0
    }

    pub(super) fn add(&mut self, g: Self) {
        self.0 |= g.0;
    }
}

/// Each literal a structural detector needs, and the gate it opens. With the rules' anchors
/// they make one automaton of at most 64 patterns, the most its vectorised prefilter takes
/// (`tests::the_anchors_keep_their_prefilter`): past that, every text is walked byte by byte.
pub(super) const GATE_LITERALS: &[(&str, Gates)] = &[
    ("==", Gates::COMPARISON),
    ("!=", Gates::COMPARISON),
    ("value=", Gates::XML_VALUE),
    ("uthorization", Gates::AUTHORIZATION),
    ("UTHORIZATION", Gates::AUTHORIZATION),
    ("kind:", Gates::KIND),
    ("ata:", Gates::DATA),
    ("--", Gates::CLI_FLAG),
    ("-u", Gates::CLI_USER),
    ("</", Gates::XML_ELEMENT),
    ("\",", Gates::PAIR),
    ("',", Gates::PAIR),
    ("||", Gates::FALLBACK),
    ("??", Gates::FALLBACK),
    (" or ", Gates::FALLBACK),
    ("unwrap_or", Gates::FALLBACK),
    (" is ", Gates::PROSE),
    (" was ", Gates::PROSE),
    (" -p", Gates::SHORT_FLAG),
    ("machine", Gates::NETRC),
];

/// A byte that cannot surround a token of the given alphabet.
pub(super) type Boundary = fn(u8) -> bool;

/// A pattern whose match (or capture group) is the secret.
#[derive(Debug)]
pub(super) struct Simple {
    pub(super) kind: SecretKind,
    /// Case-sensitive substrings one of which must occur for the pattern to run; empty: always.
    pub(super) anchors: &'static [&'static str],
    pub(super) regex: Regex,
    /// The capture group holding the secret (0: the whole match).
    pub(super) group: usize,
    /// The secret must not be preceded or followed by a byte of this class.
    pub(super) boundary: Option<Boundary>,
    /// A last check on the secret.
    pub(super) validate: fn(&str) -> bool,
}

pub(super) struct SimpleSpec {
    pub(super) kind: SecretKind,
    pub(super) anchors: &'static [&'static str],
    pub(super) pattern: &'static str,
    pub(super) group: usize,
    pub(super) boundary: Option<Boundary>,
    pub(super) validate: fn(&str) -> bool,
}

pub(super) fn always(_: &str) -> bool {
    true
}

pub(super) const PRIVATE_KEY_PATTERN: &str = concat!(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    r"(?:",
    // The whole block, through its END line.
    r#"[A-Za-z0-9+/=:,.\\"' \t\r\n-]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"#,
    r"|",
    // A block cut off: the header lines and base64 lines that follow.
    r"(?:(?:\r?\n|\\r|\\n|[ \t])+(?:Proc-Type:[^\r\n\\]*|DEK-Info:[^\r\n\\]*|[A-Za-z0-9+/=]{16,}))+",
    r")"
);

pub(super) const SIMPLE_SPECS: &[SimpleSpec] = &[
    SimpleSpec {
        kind: SecretKind::PrivateKeyBlock,
        anchors: &["-----BEGIN"],
        pattern: PRIVATE_KEY_PATTERN,
        group: 0,
        boundary: None,
        validate: has_key_material,
    },
    SimpleSpec {
        kind: SecretKind::AwsAccessKeyId,
        anchors: &["AKIA", "ASIA"],
        pattern: r"(?:AKIA|ASIA)[A-Z0-9]{16}",
        group: 0,
        boundary: Some(is_alnum),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::JwtToken,
        anchors: &["eyJ"],
        pattern: concat!(
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{4,}(?:\.[A-Za-z0-9_-]*)?",
            r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
        ),
        group: 0,
        boundary: Some(is_token_byte),
        validate: jwt_header_is_json,
    },
    SimpleSpec {
        kind: SecretKind::AwsSecretAccessKey,
        anchors: &["ecret", "ECRET"],
        pattern: concat!(
            r"(?i-u:aws_?secret_?(?:access_?)?key|secret_?access_?key)",
            r#"\\?["'`]?[ \t]*(?::|=>|=)[ \t]*\\?["'`]?([A-Za-z0-9/+]{40})"#
        ),
        group: 1,
        boundary: Some(is_base64_byte),
        validate: always,
    },
    SimpleSpec {
        kind: SecretKind::BearerToken,
        anchors: &["earer"],
        pattern: r"(?-u:\b)[Bb]earer[ \t]+([A-Za-z0-9._~+/=-]{16,})",
        group: 1,
        boundary: None,
        validate: valid_loose_bearer,
    },
    SimpleSpec {
        kind: SecretKind::UrlCredentials,
        anchors: &["://"],
        pattern: r#"[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:"'<>\\]*:([^\s/?#@"'<>\\]+)@"#,
        group: 1,
        boundary: None,
        validate: valid_url_password,
    },
    SimpleSpec {
        kind: SecretKind::UrlCredentials,
        anchors: &["://"],
        pattern: r"(?-u:\b)(?:https?|git|git\+https|ssh)://([A-Za-z0-9_~.-]{20,})@",
        group: 1,
        boundary: None,
        validate: valid_url_user_token,
    },
];

pub(super) const AUTHORIZATION_PATTERN: &str = concat!(
    r"(?i-u:(?:proxy-)?authorization)",
    r#"\\?["'`]?[ \t]*[:=][ \t]*\\?["'`]?"#,
    r"(?:([A-Za-z][A-Za-z-]*)[ \t]+)?",
    r"([A-Za-z0-9._~+/=-]+)"
);

pub(super) const ASSIGNMENT_PATTERN: &str = concat!(
    r"[A-Za-z0-9_.-]*",
    r"(?:(?i-u:pass|pwd|pw|secret|token|auth|key|credential|sonar|session)|BUNDLE_)",
    r"[A-Za-z0-9_.-]*",
    r#"(?:\\*["'`])?[ \t]*(?::=|=>|={1,3}|!==?|\?=|:)[ \t]*"#
);

/// A string literal compared with a name: `"hunter2" != password`.
pub(super) const COMPARISON_PATTERN: &str = concat!(
    r#"(?:"([^"\n\\]{1,256})"|'([^'\n\\]{1,256})')"#,
    r"[ \t]*(?:===?|!==?)[ \t]*([A-Za-z_$][A-Za-z0-9_.$]*)"
);

/// An XML setting: `<add key="ClearTextPassword" value="…" />`.
pub(super) const XML_KEY_VALUE_PATTERN: &str = r#"key="([A-Za-z0-9_.:-]{1,100})"[ \t]+value=""#;

pub(super) const CLI_FLAG_PATTERN: &str =
    r"--([A-Za-z0-9-]*(?i-u:pass|pwd|secret|token|key|auth)[A-Za-z0-9-]*)[ \t]+";

pub(super) const CLI_USER_PATTERN: &str = r"(?:-u|--user)[ \t]+";

#[allow(
    clippy::expect_used,
    reason = "the patterns are constants; a bad one fails every test"
)]
pub(super) fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("built-in redaction pattern compiles")
}

pub(super) fn build(s: &SimpleSpec) -> Simple {
    Simple {
        kind: s.kind,
        anchors: s.anchors,
        regex: compile(s.pattern),
        group: s.group,
        boundary: s.boundary,
        validate: s.validate,
    }
}

#[allow(
    clippy::expect_used,
    reason = "the anchors are constants; a bad set fails every test"
)]
pub(super) fn compile_anchors(patterns: &[&str]) -> AhoCorasick {
    // A full DFA: a few hundred short patterns make a small one, and it scans at memory speed
    // where the default NFA does not.
    AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::DFA))
        .build(patterns)
        .expect("built-in redaction anchors compile")
}

/// How far before an anchor a rule's match may start: the longest prefix a pattern has before
/// its literal (an Azure account key's 86 characters before `==`) with room to spare.
pub(super) const WINDOW_BACK: usize = 256;
/// How far past an anchor a rule's match is looked for before the window is stretched to the
/// end of the token it is in.
pub(super) const WINDOW_AHEAD: usize = 1024;

/// The byte range around an anchor hit that a rule of this kind is run on: from the hit when
/// the anchor starts the match (`prefix`), else from [`WINDOW_BACK`] before it (moved back to a blank, so a `\b` or a key name is not cut) to
/// [`WINDOW_AHEAD`] past it, stretched to the next blank; a private key block runs to the end.
pub(super) fn window(
    text: &str,
    kind: SecretKind,
    prefix: bool,
    start: usize,
    end: usize,
) -> Range<usize> {
    let bytes = text.as_bytes();
    let blank = |b: &u8| b.is_ascii_whitespace();
    let mut from = if prefix {
        start
    } else {
        start.saturating_sub(WINDOW_BACK)
    };
    if from > 0 && !prefix {
        // Back to just after a blank, at most another WINDOW_BACK bytes.
        let lo = from.saturating_sub(WINDOW_BACK);
        from = bytes[lo..from]
            .iter()
            .rposition(blank)
            .map_or(lo, |i| lo + i + 1);
    }
    let to = if kind == SecretKind::PrivateKeyBlock {
        text.len()
    } else {
        let ahead = (end + WINDOW_AHEAD).min(text.len());
        bytes[ahead..]
            .iter()
            .position(blank)
            .map_or(text.len(), |i| ahead + i)
    };
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    let mut to = to;
    while !text.is_char_boundary(to) {
        to += 1;
    }
    from..to
}

impl Simple {
    /// Matches inside `range` of `text` (char boundaries); boundaries are checked on `text`.
    pub(super) fn collect_in(&self, text: &str, range: Range<usize>, out: &mut Vec<Finding>) {
        let from = range.start;
        let Some(part) = text.get(range) else { return };
        if self.group == 0 {
            for m in self.regex.find_iter(part) {
                self.consider(text, from + m.start(), from + m.end(), out);
            }
        } else {
            for caps in self.regex.captures_iter(part) {
                if let Some(m) = caps.get(self.group) {
                    self.consider(text, from + m.start(), from + m.end(), out);
                }
            }
        }
    }

    pub(super) fn consider(&self, text: &str, start: usize, end: usize, out: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        if let Some(bad) = self.boundary {
            let before = start > 0 && bad(bytes[start - 1]);
            let after = end < bytes.len() && bad(bytes[end]);
            if before || after {
                return;
            }
        }
        let token = &text[start..end];
        // Documentation examples (`AKIAIOSFODNN7EXAMPLE`) and masks (`gho_xxxxxxxx…`).
        let example = self.kind != SecretKind::PrivateKeyBlock
            && (token.contains("EXAMPLE") || token.contains("xxxxxx") || token.contains("XXXXXX"));
        if !example && (self.validate)(token) {
            push(out, self.kind, start, end);
        }
    }
}
