//! Secret redaction for session transcripts that are about to leave the machine.
//!
//! [`scan`] finds secrets in a text and [`redact`] replaces each one with `[REDACTED:<rule>]`
//! ([`SecretKind::name`]: the rule's id, `github-pat`). A finding covers only the secret
//! *value*: in `PASSWORD=hunter2` or `"api_key": "…"` the key name and the quotes stay visible,
//! in `https://user:pw@host` only `pw` goes, in `Authorization: Bearer …` only the token goes.
//! The detectors are compiled once per process ([`Redactor::global`]; with a user's rules,
//! [`Redactor::with_rules`]). Each runs only where its literals occur: one Aho-Corasick pass
//! finds every rule's keywords and anchors, and a rule's regex then runs on the text around
//! them; the structural detectors without a literal run only on a whole run of their byte
//! class whose length fits; the assignment pattern only from a `:` or `=` whose key names a
//! secret word. Nothing is skipped by content type: a base64 image is walked like any text.
//!
//! # What is caught
//!
//! - **gitleaks' rules** ([`gitleaks`]): the 222 rules of gitleaks' maintained configuration,
//!   loaded as data (`rules/gitleaks.toml`), with their keywords, secret groups, entropy floors
//!   and allowlists, and a user's own rules in the same format added to them
//!   (`~/.freecode/redact.toml`, which can add rules and allowlists but never take a built-in
//!   rule away or switch redaction off: [`gitleaks::RuleSet::with_user`]). A rule whose secret starts with a provider's literal prefix
//!   (`NRJS-`, `sq0csp-`) also finds that secret standing alone, without the key name the rule
//!   wants around it. freecode's changes to the set are data too (`rules/freecode.toml`):
//!   gitleaks' generic rule is left to the assignment detector below, whose values gitleaks'
//!   own allowlists still judge ([`gitleaks::RuleSet::keeps`],
//!   [`gitleaks::RuleSet::generic_keeps_at`]: `publicToken = …`, `key_id: …`). What a rule
//!   matched and its own allowlist kept (the example keys gitleaks lists by value) is left alone
//!   by the shapeless detectors too: a value gitleaks' allowlists keep is never changed by them.
//! - **Random tokens standing alone** ([`entropy`]): a run of the base64 alphabets of 32 to 256
//!   characters with upper and lower case and a digit, as random as 99 in 100 random tokens of
//!   its length, that is not a hash, a UUID, a path, part of a URL without credentials, an
//!   integrity hash, base64 of a known non-secret shape or a typed example.
//! - **Formats gitleaks does not catch** (`formats`): AWS's other key id prefixes (and
//!   `AKIA`/`ASIA` with their published alphabet), Fly.io, Square, Sonar, Atlassian, Telegram,
//!   Discord, Mailchimp, Mapbox, Google refresh tokens, Gemini, xAI/Groq/Perplexity/Replicate/
//!   Tavily/LangSmith/Fireworks, Azure storage keys, Airtable personal access tokens, Discord
//!   bot tokens, Twitter access tokens and 44-character random keys; JWTs (`eyJ…` header,
//!   payload and signature), and PEM/PGP private key blocks from the `BEGIN` line through the
//!   `END` line (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP … variants; literal `\n` escapes as in a
//!   JSON string work too; a block cut off before its `END` line is redacted through its last
//!   base64 line).
//! - **Kubernetes Secrets**: in a `kind: Secret` manifest (a run of lines without a blank line
//!   or `---`, `kind:` at the indentation of `data:`), every value of 10 or more characters under
//!   `data:`/`stringData:`, whatever its key, block values (`|`) included; templates stay.
//! - A value found secret once is redacted wherever else it appears in the same text; a string
//!   literal compared with a secret name (`"…" != password`) and an XML `key="…Password"
//!   value="…"` setting are assignments too; Bundler's `BUNDLE_<HOST>__<TLD>` credentials and
//!   keys ending in a qualified `key` (`softlayer_key`) with a random-looking value count.
//! - **A value a name beside it makes a secret** (`context`): an environment lookup's default
//!   (`getenv("API_TOKEN", "…")`), a fallback (`process.env.TOKEN || "…"`), an XML element
//!   (`<password>…</password>`), a sentence (`my password is …`), the `-p` of `mysql`,
//!   `sshpass` and `docker login`, and a `.netrc` entry.
//! - Not redacted as secrets: documentation examples (`…EXAMPLE`), masks (`xxxxxx`), made-up
//!   runs (`abcdefgh…`, 8 repeated characters), elided values
//!   (`…`/`...` at the end), keys named public/fake/not (`publicToken`), and a JWT whose header
//!   does not decode to JSON.
//! - **Secrets known by their context**: AWS secret access keys (40 base64 characters) after an
//!   `aws_secret_access_key`/`SecretAccessKey` key, `Authorization:` header values (`Bearer`,
//!   `token`, … → [`SecretKind::BearerToken`], `Basic` → [`SecretKind::BasicAuth`]), `Bearer
//!   <token>` anywhere else, the password of `scheme://user:password@host` (and the user of
//!   `https://<token>@host` when it looks like a token; the user too when it equals the
//!   password, as in `root:root`), `--password value` style command-line
//!   flags and the password of `curl -u user:password`.
//! - **Assignments** ([`SecretKind::EnvAssignment`]): `KEY=value`, `export KEY="value"`,
//!   `key: value`, `"key": "value"`, `key = 'value'`, `key := value`, `key => value`, also inside
//!   JSON-escaped text (`\"key\": \"value\"`), whose key names a secret. The key is split into
//!   words (on `_`, `-`, `.` and camelCase); `?=` is a separator too. It names a secret when
//!   a word is `password`, `passwd`, `passphrase`, `secret`, `token`, `apikey`, `accesskey`,
//!   `privatekey`, `secretkey` or ends with one of those (`dbpassword`, `authtoken`); when its
//!   *last* word is `pass`/`pwd` after another word (`DB_PASS`; not `PASS` alone, test output, `PWD`, the working directory,
//!   or `pass_through`); when a word is `key` after `api`, `access`, `private`, `secret`,
//!   `client`, `signing`, … (see the source); when it is `login` after `sonar` (SonarQube's
//!   token, `sonar.login`); when its last word is `session` and the value a base64 blob of 100
//!   or more characters (an AWS session token); or when a word is `auth` (weaker, below). Then no
//!   word after the last such word may describe metadata about the secret
//!   (`PASSWORD_MIN_LENGTH`, `TOKEN_URL`, `SECRET_NAME`, `AWS_ACCESS_KEY_ID`, `token_type`,
//!   `SSH_AUTH_SOCK`, `PASSWORD_FILE`, `token_start`, …). Plurals and other words are not the
//!   secret word: `max_tokens`, `input_tokens`, `tokenizer`, `author`, `Authorization` (the
//!   header has its own rule), `secrets`. Quoted values are redacted inside the quotes only; an
//!   unquoted value runs to the next whitespace, quote, `,`, `;`, `&`, `|`, `<`, `>`, `)`, `]`,
//!   `}` or backslash (so JSON-escaped `\n` ends it).
//!
//! # Look-alikes left alone
//!
//! - Values that say nothing: empty; `true`/`false`/`null`/`none`/`nil`/`undefined`/`yes`/`no`/
//!   `on`/`off`; a number of at most 6 digits or `0x` + 6 hex digits (so a numeric PIN of up to
//!   6 digits is *not* redacted: settings such as `AUTH=1` are far more common); placeholders —
//!   `<…>`, `{…}`, `${VAR}`, `$VAR` (a one-case name: `$ecretP4ss` is still a password), `$(cmd)`,
//!   `{{ … }}` templates, masks made only of `*`, `x`, `X`, `.`, `-`, `_`, `#`, `•`, `…`
//!   (`xxx`, `***`), elided examples (`ghp_…`, `sk-...`), values starting with `your-`/`your_`/
//!   `YOUR_`/`yourCamel` or ending in `_here`/`-here`, the words `password`, `secret`, `token`,
//!   `value`, `example`, `placeholder`, `redacted`, `todo`, and anything already
//!   `[REDACTED:…]`. `changeme` is **kept** redacted: it is often the real password.
//! - Names instead of values: an identifier with a secret word as a whole word
//!   (`password=password`, `token: githubToken`, `Kind::Token => "github_token"`, but not
//!   `abc123secret`).
//! - Unquoted values that are code: containing `(`, `[`, `{`, `::` or `->` (unless a bracket
//!   closes one of another kind, `m{{h}o)p…`: code never does that, so it is a password with
//!   symbols and runs to the next blank); followed by `{` or
//!   `(`; starting with `&`, `*`, `@` or `_`; dotted paths (`self.token`, `process.env.TOKEN`);
//!   type names (`api_key: str`, `token: String`, `password: Option<…>`; `password: str = "x"`
//!   still redacts `x`); declarations (`let`/`const`/`var`/`val`/`type`/`pub`/… `token = tok`:
//!   a variable, literals in code are quoted); ABNF (`token = 1*tchar`); prose words
//!   (`token: the …`, `auth: required`, `id-token: write`). After a `:` also capitalised words
//!   and CamelCase types (`token: Literal`, `password: CFStringRef`, but not random tokens such
//!   as `K7GHQ2MZPX`), struct-literal fields (`token: cached,`) and a lowercase word followed by
//!   more words (`ACCESS_KEY: alias for …`); and a `:` needs a space before an unquoted value
//!   (`Token::new`, `PASS:TestFoo`, `auth:login`).
//! - Quoted values that are not one: text between two string literals
//!   (`print("Password: ", end="")`) and backtick inline code that is not one credential-looking
//!   word (the secret: `x = y`).
//! - Stricter values for weak keys: a key whose only secret word is `auth`, and `--flag value`
//!   flags, need at least 8 (flags: 6) characters with a digit, mixed case or a symbol (`auth:
//!   basic`, "pass the `--token` flag" stay).
//! - Format tokens need their full length and a word boundary on both sides (`AKIA` in prose,
//!   `task-sk-1`, `sk-learn`, `ghp_` in an identifier); OpenAI keys also need digits, upper and
//!   lower case and a 16-character alphanumeric run; `Bearer` in prose needs a 16+ character token
//!   with a digit; header values need 8+ characters that are not a lone lowercase word, a type
//!   name or a placeholder name (`Bearer OAUTH2_TOKEN`); a key block needs base64 in it.
//! - Entropy alone flags only a random token as [`entropy`] defines it: git SHAs, UUIDs, hex
//!   hashes, base64 blobs (images), integrity hashes and paths such as `src/secret_store.rs`
//!   are left alone.
//!
//! Overlaps are resolved by specificity first, then length: a private key block beats
//! everything inside it, a format token beats the assignment, header or URL it sits in (so
//! `GITHUB_TOKEN=ghp_…` is gitleaks' `github-pat`), a random token loses to anything that names
//! it, and the remaining findings are sorted and disjoint. A text with findings is scanned again with them redacted until nothing new
//! turns up, so redacting is idempotent.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind};
use regex::Regex;

mod context;
pub mod entropy;
mod formats;
pub mod gitleaks;

/// What kind of secret a finding is: the stable snake_case [`name`](Self::name) appears in the
/// placeholders and in `--dry-run` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecretKind {
    /// AWS access key id, `AKIA…`/`ASIA…`.
    AwsAccessKeyId,
    /// AWS secret access key (40 base64 characters after its key name).
    AwsSecretAccessKey,
    /// A whole PEM/PGP private key block.
    PrivateKeyBlock,
    /// A JSON Web Token.
    JwtToken,
    /// The credentials of an `Authorization:` header (other than `Basic`) or a `Bearer <token>`.
    BearerToken,
    /// The credentials of an `Authorization: Basic` header or of `curl -u user:password`.
    BasicAuth,
    /// The password in `scheme://user:password@host`, or a token used as the user.
    UrlCredentials,
    /// The value of a secret command-line flag (`--password value`).
    CliFlag,
    /// The value of an assignment whose key names a secret (`PASSWORD=…`, `"token": "…"`).
    EnvAssignment,
    /// Azure secret: an Entra ID (AD) client secret (`…Q~…`), a storage or Cosmos DB account
    /// key, an `AccountKey=`/`SharedAccessKey=` value, a container registry password.
    AzureKey,
    /// A token in another provider's published format (Twilio, SendGrid, Shopify, Discord,
    /// Telegram, Vault, Terraform, DigitalOcean, xAI, Groq, Pinecone, …: see the module docs).
    ApiToken,
    /// A random-looking token standing alone, with no prefix or key name ([`entropy`]).
    RandomToken,
    /// A secret one rule of the rule set found ([`gitleaks::RuleSet`]): its id (`github-pat`).
    Rule(&'static str),
}

impl SecretKind {
    /// Every kind, in declaration order.
    pub const ALL: [SecretKind; 12] = [
        Self::AwsAccessKeyId,
        Self::AwsSecretAccessKey,
        Self::PrivateKeyBlock,
        Self::JwtToken,
        Self::BearerToken,
        Self::BasicAuth,
        Self::UrlCredentials,
        Self::CliFlag,
        Self::EnvAssignment,
        Self::AzureKey,
        Self::ApiToken,
        Self::RandomToken,
    ];

    /// The stable rule id, as `[REDACTED:<id>]` and `--dry-run` name it: a rule of the rule set
    /// by its own id (gitleaks' `github-pat`), the redactor's own detectors by ids of the same
    /// style (an AWS key id is gitleaks' `aws-access-token`, found by either).
    pub fn name(&self) -> &'static str {
        match self {
            Self::AwsAccessKeyId => "aws-access-token",
            Self::AwsSecretAccessKey => "aws-secret-access-key",
            Self::PrivateKeyBlock => "private-key",
            Self::JwtToken => "jwt",
            Self::BearerToken => "authorization-token",
            Self::BasicAuth => "basic-auth",
            Self::UrlCredentials => "url-credentials",
            Self::CliFlag => "cli-flag",
            Self::EnvAssignment => "secret-assignment",
            Self::AzureKey => "azure-key",
            Self::ApiToken => "api-token",
            Self::RandomToken => "random-token",
            Self::Rule(id) => id,
        }
    }

    /// The kind with this [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// How specific a match of this kind is; on overlap the higher rank wins.
    fn rank(self) -> u8 {
        match self {
            Self::PrivateKeyBlock => 100,
            Self::AwsAccessKeyId | Self::AzureKey | Self::ApiToken => 90,
            // A generic rule (a key name and a random value) is an assignment; the others
            // name a provider's format.
            Self::Rule(id) if id.starts_with("generic") => 15,
            Self::Rule(_) => 90,
            Self::JwtToken => 80,
            Self::AwsSecretAccessKey => 70,
            Self::BearerToken | Self::BasicAuth => 60,
            Self::UrlCredentials => 50,
            Self::CliFlag => 20,
            Self::EnvAssignment => 10,
            Self::RandomToken => 5,
        }
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One secret found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Finding {
    /// What kind of secret it is.
    pub kind: SecretKind,
    /// Byte offset of the first byte of the secret value.
    pub start: usize,
    /// Byte offset just past the secret value.
    pub end: usize,
}

impl Finding {
    /// The byte range of the secret value.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

/// What every placeholder starts with: `[REDACTED:<kind name>]`.
pub const PLACEHOLDER_PREFIX: &str = "[REDACTED:";

/// The text that replaces a secret of this kind, `[REDACTED:<kind name>]`.
pub fn placeholder(kind: SecretKind) -> String {
    format!("{PLACEHOLDER_PREFIX}{}]", kind.name())
}

/// A masked preview of `secret` for `--dry-run`: its first and last characters around an
/// ellipsis (`ghp_…k2Q`), never more than a quarter of it (at most 4 at the start and 3 at the
/// end), only the ellipsis for a secret of fewer than 8 characters.
pub fn preview(secret: &str) -> String {
    let chars: Vec<char> = secret.chars().collect();
    let n = chars.len();
    if n < 8 {
        return "…".to_owned();
    }
    let head = (n / 4).min(4);
    let tail = (n / 8).min(3);
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[n - tail..]);
    out
}

/// The secrets in `text`, sorted by start and non-overlapping (see the [module docs](self)).
pub fn scan(text: &str) -> Vec<Finding> {
    Redactor::global().scan(text)
}

/// `text` with every secret replaced by `[REDACTED:<kind name>]`, and the findings (offsets in
/// the *input*). Borrowed when nothing was found.
pub fn redact(text: &str) -> (Cow<'_, str>, Vec<Finding>) {
    Redactor::global().redact(text)
}

/// `text` with the given findings replaced by their placeholders. The findings must be sorted,
/// non-overlapping, in bounds and on character boundaries, as [`scan`] returns them; findings
/// that are not are skipped.
pub fn apply<'a>(text: &'a str, findings: &[Finding]) -> Cow<'a, str> {
    if findings.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + findings.len() * 16);
    let mut last = 0;
    for f in findings {
        let (Some(before), true) = (text.get(last..f.start), f.start < f.end) else {
            continue;
        };
        if text.get(f.start..f.end).is_none() {
            continue;
        }
        out.push_str(before);
        out.push_str(PLACEHOLDER_PREFIX);
        out.push_str(f.kind.name());
        out.push(']');
        last = f.end;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// The compiled detectors. Build one with [`Redactor::new`] or share the process-wide
/// [`Redactor::global`] (what [`scan`] and [`redact`] use).
#[derive(Debug)]
pub struct Redactor {
    simple: Vec<Simple>,
    /// Every anchor of `simple`, found in one pass; `anchor_rules[i]` are the rules anchor `i`
    /// gates.
    anchors: AhoCorasick,
    /// `(rule, whether the anchor starts every match of the rule's alternative it is in)`.
    anchor_rules: Vec<Vec<(usize, bool)>>,
    /// The [`Gates`] anchor `i` opens (the literals the structural detectors need, found in
    /// the same pass).
    anchor_gates: Vec<Gates>,
    /// Structural rules without a literal: each runs only on a maximal run of its boundary
    /// class whose length fits the rule (see [`formats::RUN_RULES`]).
    run_rules: Vec<(Simple, formats::RunClass, usize, usize)>,
    /// The rule set run beside the detectors (gitleaks' rules, a user's merged over them).
    rules: std::sync::Arc<gitleaks::RuleSet>,
    comparison: Regex,
    xml_key_value: Regex,
    authorization: Regex,
    assignment: Regex,
    cli_flag: Regex,
    cli_user: Regex,
    /// The other shapes a name gives a value in ([`context`]).
    context: context::Context,
}

impl Default for Redactor {
    fn default() -> Self {
        Self::new()
    }
}

static GLOBAL: LazyLock<Redactor> = LazyLock::new(Redactor::new);

/// The structural detectors a text's literals let run, one bit each: a detector runs only when
/// the anchors' pass found one of its literals ([`GATE_LITERALS`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Gates(u16);

impl Gates {
    const COMPARISON: Self = Self(1);
    const XML_VALUE: Self = Self(1 << 1);
    const AUTHORIZATION: Self = Self(1 << 2);
    const KIND: Self = Self(1 << 3);
    const DATA: Self = Self(1 << 4);
    const CLI_FLAG: Self = Self(1 << 5);
    const CLI_USER: Self = Self(1 << 6);
    const XML_ELEMENT: Self = Self(1 << 7);
    const PAIR: Self = Self(1 << 8);
    const FALLBACK: Self = Self(1 << 9);
    const PROSE: Self = Self(1 << 10);
    const SHORT_FLAG: Self = Self(1 << 11);
    const NETRC: Self = Self(1 << 12);

    fn has(self, g: Self) -> bool {
        self.0 & g.0 != 0
    }

    fn add(&mut self, g: Self) {
        self.0 |= g.0;
    }
}

/// Each literal a structural detector needs, and the gate it opens. With the rules' anchors
/// they make one automaton of at most 64 patterns, the most its vectorised prefilter takes
/// (`tests::the_anchors_keep_their_prefilter`): past that, every text is walked byte by byte.
const GATE_LITERALS: &[(&str, Gates)] = &[
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
type Boundary = fn(u8) -> bool;

/// A pattern whose match (or capture group) is the secret.
#[derive(Debug)]
struct Simple {
    kind: SecretKind,
    /// Case-sensitive substrings one of which must occur for the pattern to run; empty: always.
    anchors: &'static [&'static str],
    regex: Regex,
    /// The capture group holding the secret (0: the whole match).
    group: usize,
    /// The secret must not be preceded or followed by a byte of this class.
    boundary: Option<Boundary>,
    /// A last check on the secret.
    validate: fn(&str) -> bool,
}

struct SimpleSpec {
    kind: SecretKind,
    anchors: &'static [&'static str],
    pattern: &'static str,
    group: usize,
    boundary: Option<Boundary>,
    validate: fn(&str) -> bool,
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn is_token_byte(b: u8) -> bool {
    is_word(b) || b == b'-'
}

fn is_base64_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/')
}

fn always(_: &str) -> bool {
    true
}

const PRIVATE_KEY_PATTERN: &str = concat!(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
    r"(?:",
    // The whole block, through its END line.
    r#"[A-Za-z0-9+/=:,.\\"' \t\r\n-]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"#,
    r"|",
    // A block cut off: the header lines and base64 lines that follow.
    r"(?:(?:\r?\n|\\r|\\n|[ \t])+(?:Proc-Type:[^\r\n\\]*|DEK-Info:[^\r\n\\]*|[A-Za-z0-9+/=]{16,}))+",
    r")"
);

const SIMPLE_SPECS: &[SimpleSpec] = &[
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

const AUTHORIZATION_PATTERN: &str = concat!(
    r"(?i-u:(?:proxy-)?authorization)",
    r#"\\?["'`]?[ \t]*[:=][ \t]*\\?["'`]?"#,
    r"(?:([A-Za-z][A-Za-z-]*)[ \t]+)?",
    r"([A-Za-z0-9._~+/=-]+)"
);

const ASSIGNMENT_PATTERN: &str = concat!(
    r"[A-Za-z0-9_.-]*",
    r"(?:(?i-u:pass|pwd|pw|secret|token|auth|key|credential|sonar|session)|BUNDLE_)",
    r"[A-Za-z0-9_.-]*",
    r#"(?:\\*["'`])?[ \t]*(?::=|=>|={1,3}|!==?|\?=|:)[ \t]*"#
);

/// A string literal compared with a name: `"hunter2" != password`.
const COMPARISON_PATTERN: &str = concat!(
    r#"(?:"([^"\n\\]{1,256})"|'([^'\n\\]{1,256})')"#,
    r"[ \t]*(?:===?|!==?)[ \t]*([A-Za-z_$][A-Za-z0-9_.$]*)"
);

/// An XML setting: `<add key="ClearTextPassword" value="…" />`.
const XML_KEY_VALUE_PATTERN: &str = r#"key="([A-Za-z0-9_.:-]{1,100})"[ \t]+value=""#;

const CLI_FLAG_PATTERN: &str =
    r"--([A-Za-z0-9-]*(?i-u:pass|pwd|secret|token|key|auth)[A-Za-z0-9-]*)[ \t]+";

const CLI_USER_PATTERN: &str = r"(?:-u|--user)[ \t]+";

#[allow(
    clippy::expect_used,
    reason = "the patterns are constants; a bad one fails every test"
)]
fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("built-in redaction pattern compiles")
}

fn build(s: &SimpleSpec) -> Simple {
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
fn compile_anchors(patterns: &[&str]) -> AhoCorasick {
    // A full DFA: a few hundred short patterns make a small one, and it scans at memory speed
    // where the default NFA does not.
    AhoCorasick::builder()
        .kind(Some(AhoCorasickKind::DFA))
        .build(patterns)
        .expect("built-in redaction anchors compile")
}

/// How far before an anchor a rule's match may start: the longest prefix a pattern has before
/// its literal (an Azure account key's 86 characters before `==`) with room to spare.
const WINDOW_BACK: usize = 256;
/// How far past an anchor a rule's match is looked for before the window is stretched to the
/// end of the token it is in.
const WINDOW_AHEAD: usize = 1024;

/// The byte range around an anchor hit that a rule of this kind is run on: from the hit when
/// the anchor starts the match (`prefix`), else from [`WINDOW_BACK`] before it (moved back to a blank, so a `\b` or a key name is not cut) to
/// [`WINDOW_AHEAD`] past it, stretched to the next blank; a private key block runs to the end.
fn window(text: &str, kind: SecretKind, prefix: bool, start: usize, end: usize) -> Range<usize> {
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

impl Redactor {
    /// Compiles the detectors with the built-in rule set (a few milliseconds; prefer
    /// [`Redactor::global`]).
    pub fn new() -> Self {
        Self::with_rules(std::sync::Arc::new(gitleaks::RuleSet::builtin().clone()))
    }

    /// Compiles the detectors with `rules` (the built-in rule set with a user's merged over it:
    /// [`gitleaks::RuleSet::with_user`]).
    pub fn with_rules(rules: std::sync::Arc<gitleaks::RuleSet>) -> Self {
        let specs: Vec<&SimpleSpec> = SIMPLE_SPECS.iter().chain(formats::FORMAT_SPECS).collect();
        let simple: Vec<Simple> = specs.iter().map(|s| build(s)).collect();
        let mut patterns: Vec<&str> = Vec::new();
        let mut anchor_rules: Vec<Vec<(usize, bool)>> = Vec::new();
        for (i, (s, spec)) in simple.iter().zip(specs).enumerate() {
            for a in s.anchors {
                // A literal the pattern or one of its top-level alternatives starts with.
                let prefix = spec.pattern.starts_with(a) || spec.pattern.contains(&format!("|{a}"));
                match patterns.iter().position(|p| p == a) {
                    Some(j) => anchor_rules[j].push((i, prefix)),
                    None => {
                        patterns.push(a);
                        anchor_rules.push(vec![(i, prefix)]);
                    }
                }
            }
        }
        let mut anchor_gates = vec![Gates::default(); patterns.len()];
        for &(literal, gate) in GATE_LITERALS {
            match patterns.iter().position(|p| *p == literal) {
                Some(j) => anchor_gates[j].add(gate),
                None => {
                    patterns.push(literal);
                    anchor_rules.push(Vec::new());
                    anchor_gates.push(gate);
                }
            }
        }
        Self {
            simple,
            anchors: compile_anchors(&patterns),
            anchor_rules,
            anchor_gates,
            run_rules: formats::RUN_RULES
                .iter()
                .map(|r| (build(&r.spec), r.class, r.min, r.max))
                .collect(),
            rules,
            comparison: compile(COMPARISON_PATTERN),
            xml_key_value: compile(XML_KEY_VALUE_PATTERN),
            authorization: compile(AUTHORIZATION_PATTERN),
            assignment: compile(ASSIGNMENT_PATTERN),
            cli_flag: compile(CLI_FLAG_PATTERN),
            cli_user: compile(CLI_USER_PATTERN),
            context: context::Context::new(),
        }
    }

    /// The process-wide instance, compiled on first use.
    pub fn global() -> &'static Redactor {
        &GLOBAL
    }

    /// The secrets in `text`, sorted by start and non-overlapping.
    ///
    /// When a text had findings, it is scanned again with them redacted, until nothing new
    /// turns up: a candidate that lost an overlap (a token running into a key block) can match
    /// once its neighbour is a placeholder, and redacting twice must change nothing.
    pub fn scan(&self, text: &str) -> Vec<Finding> {
        let mut repeats = Repeats::default();
        let mut findings = self.scan_once(text);
        findings = repeats.add(text, findings);
        for _ in 0..MAX_EXTRA_PASSES {
            if findings.is_empty() {
                break;
            }
            let redacted = apply(text, &findings);
            let more = self.scan_once(&redacted);
            if more.is_empty() {
                break;
            }
            findings.extend(map_back(&findings, &more));
            findings.sort_by_key(|f| f.start);
            findings = repeats.add(text, findings);
        }
        findings
    }

    /// One pass of every detector, overlaps resolved.
    fn scan_once(&self, text: &str) -> Vec<Finding> {
        let mut found = Vec::new();
        // Each rule runs on the merged windows around its anchors' hits, not on the whole text.
        let mut windows: Vec<Vec<Range<usize>>> = vec![Vec::new(); self.simple.len()];
        let bytes = text.as_bytes();
        let mut gates = Gates::default();
        for m in self.anchors.find_overlapping_iter(text) {
            gates.add(self.anchor_gates[m.pattern().as_usize()]);
            for &(i, prefix) in &self.anchor_rules[m.pattern().as_usize()] {
                let rule = &self.simple[i];
                // A token that starts with this anchor cannot start after a byte of its own
                // alphabet (`EAAA` inside base64): the hit gates nothing.
                if prefix
                    && m.start() > 0
                    && rule.boundary.is_some_and(|bad| bad(bytes[m.start() - 1]))
                {
                    continue;
                }
                let w = &mut windows[i];
                // The last window already reaches a blank past this hit's WINDOW_AHEAD: this
                // hit's window would end there too.
                if w.last().is_some_and(|l| l.end >= m.end() + WINDOW_AHEAD) {
                    continue;
                }
                let next = window(text, rule.kind, prefix, m.start(), m.end());
                match w.last_mut() {
                    Some(l) if next.start <= l.end => l.end = l.end.max(next.end),
                    _ => w.push(next),
                }
            }
        }
        for (s, ws) in self.simple.iter().zip(&windows) {
            if s.anchors.is_empty() {
                s.collect_in(text, 0..text.len(), &mut found);
            }
            for w in ws {
                s.collect_in(text, w.clone(), &mut found);
            }
        }
        same_user_as_password(text, &mut found);
        let mut hits = Vec::new();
        let mut kept = Vec::new();
        self.rules.find_kept(text, &mut hits, &mut kept);
        for h in hits {
            // The name of a secret (`OAUTH2_TOKEN`, `githubToken`) is not one, whichever rule
            // found it. (Repetition and sequences are a format's own business here: a Twitter
            // bearer token starts with twenty `A`s.)
            if is_secret_name(&text[h.secret.clone()]) {
                continue;
            }
            push(
                &mut found,
                SecretKind::Rule(self.rules.id(h.rule)),
                h.secret.start,
                h.secret.end,
            );
        }
        let mut tokens = Vec::new();
        entropy::find(text, &mut tokens);
        for t in tokens {
            push(&mut found, SecretKind::RandomToken, t.start, t.end);
        }
        formats::for_each_run(text, |class, start, end| {
            for (s, c, min, max) in &self.run_rules {
                if *c == class && (*min..=*max).contains(&(end - start)) {
                    s.collect_in(text, start..end, &mut found);
                }
            }
        });
        if gates.has(Gates::COMPARISON) {
            self.collect_comparisons(text, &mut found);
        }
        if gates.has(Gates::XML_VALUE) {
            self.collect_xml_key_values(text, &mut found);
        }
        if gates.has(Gates::AUTHORIZATION) {
            self.collect_authorization(text, &mut found);
        }
        self.collect_assignments(text, &mut found);
        if gates.has(Gates::KIND) && gates.has(Gates::DATA) {
            collect_kubernetes_secret(text, &mut found);
        }
        if gates.has(Gates::CLI_FLAG) {
            self.collect_cli_flags(text, &mut found);
        }
        if gates.has(Gates::CLI_USER) {
            self.collect_cli_users(text, &mut found);
        }
        self.context.collect(text, gates, &mut found);
        // A value the global allowlist keeps stays, whoever found it (`${VAR}`, `true`, a
        // user's own entries); what a key name and a random value make is judged by gitleaks'
        // generic rule's allowlists too (by the value, its match or its line).
        let generic = |k: SecretKind| {
            matches!(
                k,
                SecretKind::EnvAssignment | SecretKind::CliFlag | SecretKind::RandomToken
            )
        };
        // Certificates, public keys and other public PEM blocks hold nothing secret.
        let public = if found.is_empty() {
            Vec::new()
        } else {
            public_pem_blocks(text)
        };
        found.retain(|f| {
            f.kind == SecretKind::PrivateKeyBlock
                || !public.iter().any(|b| b.start <= f.start && f.end <= b.end)
        });
        found.retain(|f| {
            let value = &text[f.start..f.end];
            // The overlay's `disabledRules` may name our own detectors too (`random-token`).
            let disabled = self.rules.disables(f.kind.name());
            // What a rule matched and its own allowlist kept (a published example key, a
            // `publicToken`) is not guessed back into a secret by a shapeless detector.
            let kept_by_rule = generic(f.kind)
                && kept
                    .iter()
                    .any(|h| h.secret.start < f.end && f.start < h.secret.end);
            !(disabled
                || kept_by_rule
                || self.rules.keeps(value)
                || (f.kind != SecretKind::PrivateKeyBlock && made_up(value))
                || (generic(f.kind) && self.rules.keeps_generic(value)))
        });
        let mut found = resolve(text, found);
        // The generic rule's match and line allowlists (`key_id: …`) run that rule's regex on
        // the line: only for what is left once a more specific finding took its place.
        found.retain(|f| !(generic(f.kind) && self.rules.generic_keeps_at(text, f.start..f.end)));
        found
    }

    /// `text` with every secret replaced by `[REDACTED:<kind name>]`, and the findings.
    /// Borrowed when nothing was found.
    pub fn redact<'a>(&self, text: &'a str) -> (Cow<'a, str>, Vec<Finding>) {
        let findings = self.scan(text);
        (apply(text, &findings), findings)
    }

    fn collect_authorization(&self, text: &str, out: &mut Vec<Finding>) {
        for caps in self.authorization.captures_iter(text) {
            let Some(token) = caps.get(2) else { continue };
            let scheme = caps.get(1).map(|m| m.as_str());
            let value = token.as_str();
            if !valid_header_credentials(value) {
                continue;
            }
            let kind = if scheme.is_some_and(|s| s.eq_ignore_ascii_case("basic")) {
                SecretKind::BasicAuth
            } else {
                SecretKind::BearerToken
            };
            push(out, kind, token.start(), token.end());
        }
    }

    fn collect_assignments(&self, text: &str, out: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        let matches = assignment_windows(text).into_iter().flat_map(|w| {
            let from = w.start;
            self.assignment
                .find_iter(&text[w])
                .map(move |m| (from + m.start())..(from + m.end()))
        });
        for m in matches {
            // The match is `key`, an optional closing quote, blanks, the separator, blanks.
            let span = &bytes[m.start..m.end];
            let key_len = span
                .iter()
                .position(|&b| !(is_word(b) || b == b'.' || b == b'-'))
                .unwrap_or(span.len());
            let key = text[m.start..m.start + key_len].trim_start_matches(['-', '.']);
            let Some(strength) = classify_key(key) else {
                continue;
            };
            let before = &text[..m.start];
            // `Kind::Token => …`: a path in code, not a key.
            if before.ends_with("::") {
                continue;
            }
            // `let token = …`: in code an unquoted value is a variable, not a literal.
            let declared = {
                let b = before.trim_end_matches([' ', '\t']);
                b.len() < before.len()
                    && DECLARATION_KEYWORDS.iter().any(|k| {
                        b.strip_suffix(k).is_some_and(|r| {
                            r.is_empty() || r.ends_with(|c: char| !c.is_ascii_alphanumeric())
                        })
                    })
            };
            let rest = &span[key_len..];
            let blanks = rest
                .iter()
                .rev()
                .take_while(|&&b| b == b' ' || b == b'\t')
                .count();
            let sep = &rest[..rest.len() - blanks];
            let sep_is_colon = sep.ends_with(b":");
            let comparison = sep.ends_with(b"==") || sep.ends_with(b"!=");
            // `Token::new`, `a :: b`: a path, not an assignment.
            if sep_is_colon && bytes.get(m.end) == Some(&b':') {
                continue;
            }
            let Some(value) = parse_value(text, m.end) else {
                continue;
            };
            // `key:value` without a space is only an assignment when the value is quoted (JSON).
            if sep_is_colon && !value.quoted && blanks == 0 {
                continue;
            }
            if comparison && !value.quoted {
                continue;
            }
            if let Some(v) = judge(text, value, strength, true)
                && (v.quoted || !(declared || (sep_is_colon && colon_code_or_prose(text, v))))
            {
                push(out, SecretKind::EnvAssignment, v.start, v.end);
            }
        }
    }

    fn collect_comparisons(&self, text: &str, out: &mut Vec<Finding>) {
        for caps in self.comparison.captures_iter(text) {
            let (Some(value), Some(name)) = (caps.get(1).or_else(|| caps.get(2)), caps.get(3))
            else {
                continue;
            };
            let key = name.as_str().rsplit('.').next().unwrap_or_default();
            let Some(strength) = classify_key(key) else {
                continue;
            };
            let v = Value {
                start: value.start(),
                end: value.end(),
                quoted: true,
                backtick: false,
            };
            if let Some(v) = judge(text, v, strength, false) {
                push(out, SecretKind::EnvAssignment, v.start, v.end);
            }
        }
    }

    fn collect_xml_key_values(&self, text: &str, out: &mut Vec<Finding>) {
        for caps in self.xml_key_value.captures_iter(text) {
            let (Some(all), Some(key)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            let Some(strength) = classify_key(key.as_str()) else {
                continue;
            };
            let Some(value) = parse_value(text, all.end() - 1) else {
                continue;
            };
            if let Some(v) = judge(text, value, strength, false) {
                push(out, SecretKind::EnvAssignment, v.start, v.end);
            }
        }
    }

    fn collect_cli_flags(&self, text: &str, out: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        for caps in self.cli_flag.captures_iter(text) {
            let (Some(all), Some(flag)) = (caps.get(0), caps.get(1)) else {
                continue;
            };
            if !starts_argument(bytes, all.start()) {
                continue;
            }
            if classify_key(flag.as_str()).is_none() {
                continue;
            }
            let Some(value) = parse_value(text, all.end()) else {
                continue;
            };
            if let Some(v) = judge(text, value, Strength::Cli, false) {
                push(out, SecretKind::CliFlag, v.start, v.end);
            }
        }
    }

    fn collect_cli_users(&self, text: &str, out: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        for m in self.cli_user.find_iter(text) {
            if !starts_argument(bytes, m.start()) {
                continue;
            }
            let Some(value) = parse_value(text, m.end()) else {
                continue;
            };
            let raw = &text[value.start..value.end];
            let Some(colon) = raw.find(':') else { continue };
            // `--user kevin:'p4ss'`: the password is quoted on its own.
            if colon + 1 == raw.len()
                && let Some(quoted) = parse_value(text, value.end)
                && quoted.quoted
            {
                if let Some(v) = judge(text, quoted, Strength::Cli, false) {
                    push(out, SecretKind::BasicAuth, v.start, v.end);
                }
                continue;
            }
            let password = Value {
                start: value.start + colon + 1,
                quoted: true,
                ..value
            };
            if password.start >= password.end {
                continue;
            }
            if let Some(v) = judge(text, password, Strength::Cli, false) {
                push(out, SecretKind::BasicAuth, v.start, v.end);
            }
        }
    }
}

impl Simple {
    /// Matches inside `range` of `text` (char boundaries); boundaries are checked on `text`.
    fn collect_in(&self, text: &str, range: Range<usize>, out: &mut Vec<Finding>) {
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

    fn consider(&self, text: &str, start: usize, end: usize, out: &mut Vec<Finding>) {
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

/// Longest key an assignment is looked for in: a longer run of key characters before a `:` or
/// `=` is data (base64, a minified line), not a name.
const MAX_KEY: usize = 200;

/// Whether a key byte run names a secret word of [`ASSIGNMENT_PATTERN`] (case-insensitively).
fn mentions_secret_word(key: &[u8]) -> bool {
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
fn assignment_windows(text: &str) -> Vec<Range<usize>> {
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
const DECLARATION_KEYWORDS: &[&str] = &[
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
const MAX_EXTRA_PASSES: usize = 4;

/// Maps findings in `apply(text, done)` back to offsets in `text`. They never overlap a
/// placeholder, so each lies in a stretch of original text between two of `done`.
fn map_back(done: &[Finding], more: &[Finding]) -> Vec<Finding> {
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
const MIN_REPEATED_VALUE: usize = 8;

/// The values the findings of one [`Redactor::scan`] redact, and the automaton that finds them:
/// built once, and again only when a pass finds a new value.
#[derive(Default)]
struct Repeats<'t> {
    values: Vec<&'t str>,
    automaton: Option<AhoCorasick>,
}

impl<'t> Repeats<'t> {
    /// `findings` plus every other occurrence of a value one of them redacts (`token = 'abc…' |
    /// 'abc…'`): once a value is known to be secret, it goes wherever it appears in the text.
    fn add(&mut self, text: &'t str, findings: Vec<Finding>) -> Vec<Finding> {
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
const MIN_SECRET_DATA: usize = 10;

/// The lines of `text` with their byte offsets (without the line break).
fn lines_at(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut at = 0;
    text.split('\n').map(move |l| {
        let start = at;
        at += l.len() + 1;
        (start, l.strip_suffix('\r').unwrap_or(l))
    })
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// A Kubernetes `kind: Secret` manifest (YAML): every value under its `data:` or `stringData:`
/// is a secret whatever its key (`extra`, `.dockercfg`), including `|`/`>` block values. The
/// manifest is a run of lines without a blank line or a `---`, and `kind:` sits at the
/// indentation of `data:`.
fn collect_kubernetes_secret(text: &str, out: &mut Vec<Finding>) {
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

fn kubernetes_manifest(lines: &[(usize, &str)], out: &mut Vec<Finding>) {
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
fn same_user_as_password(text: &str, found: &mut Vec<Finding>) {
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

fn push(out: &mut Vec<Finding>, kind: SecretKind, start: usize, end: usize) {
    if start < end {
        out.push(Finding { kind, start, end });
    }
}

/// Whether a command-line argument can start at `pos` (start of text or after a separator).
fn starts_argument(bytes: &[u8], pos: usize) -> bool {
    pos == 0
        || matches!(
            bytes[pos - 1],
            b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'`' | b'(' | b'[' | b','
        )
}

/// Keeps the most specific, then longest, candidates; drops anything overlapping an existing
/// placeholder; returns them sorted by start.
fn resolve(text: &str, mut found: Vec<Finding>) -> Vec<Finding> {
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
fn placeholder_ranges(text: &str) -> Vec<Range<usize>> {
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

// ---- assignment keys -------------------------------------------------------------------------

/// How much evidence a value needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strength {
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
const SECRET_STEMS: &[&str] = &[
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
const NOT_SECRET_WORDS: &[&str] = &["public", "publishable", "not", "non", "fake", "dummy"];

/// Qualifiers of `key` that make it a data-structure key, not a secret (`cache_key`).
const NON_SECRET_KEY_QUALIFIERS: &[&str] = &[
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
const KEY_QUALIFIERS: &[&str] = &[
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
const META_WORDS: &[&str] = &[
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
fn words(ident: &str) -> Vec<&str> {
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

fn ends_with_ci(word: &str, suffix: &str) -> bool {
    let (w, s) = (word.as_bytes(), suffix.as_bytes());
    w.len() >= s.len() && w[w.len() - s.len()..].eq_ignore_ascii_case(s)
}

fn in_ci(list: &[&str], word: &str) -> bool {
    list.iter().any(|w| w.eq_ignore_ascii_case(word))
}

/// Whether word `i` of `words` is a secret word, and how strong.
fn secret_word(words: &[&str], i: usize) -> Option<Strength> {
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
fn classify_key(key: &str) -> Option<Strength> {
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

// ---- values ----------------------------------------------------------------------------------

/// A candidate value: a byte range, and whether it was inside quotes.
#[derive(Debug, Clone, Copy)]
struct Value {
    start: usize,
    end: usize,
    quoted: bool,
    /// Quoted in backticks: a JS template literal, or inline code in Markdown prose.
    backtick: bool,
}

fn is_unquoted_terminator(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b'"' | b'\''
                | b'`'
                | b','
                | b';'
                | b')'
                | b']'
                | b'}'
                | b'\\'
                | b'&'
                | b'|'
                | b'<'
                | b'>'
        )
}

/// The value starting at `pos`: the inside of `"…"`, `'…'`, `` `…` `` or JSON-escaped `\"…\"`
/// (on one line), or an unquoted run up to a terminator.
fn parse_value(text: &str, pos: usize) -> Option<Value> {
    let b = text.as_bytes();
    let first = *b.get(pos)?;
    // A quote escaped more than once (`\\\"…\\\"`, JSON inside a JSON string): the value runs
    // to the same quote escaped the same number of times.
    let slashes = b[pos..].iter().take(8).take_while(|&&c| c == b'\\').count();
    if slashes > 1 && matches!(b.get(pos + slashes), Some(b'"' | b'\'')) {
        let quote = b[pos + slashes];
        let start = pos + slashes + 1;
        let mut i = start;
        while i < b.len() {
            match b[i] {
                b'\n' | b'\r' => return None,
                c if c == quote => {
                    let run = b[start..i]
                        .iter()
                        .rev()
                        .take_while(|&&c| c == b'\\')
                        .count();
                    if run == slashes {
                        return (i - run > start).then_some(Value {
                            start,
                            end: i - run,
                            quoted: true,
                            backtick: false,
                        });
                    }
                }
                _ => {}
            }
            i += 1;
        }
        return None;
    }
    if first == b'\\' && matches!(b.get(pos + 1), Some(b'"' | b'\'')) {
        let quote = b[pos + 1];
        let start = pos + 2;
        let mut i = start;
        while i + 1 < b.len() {
            match b[i] {
                b'\n' | b'\r' => return None,
                b'\\' if b[i + 1] == quote => {
                    return (i > start).then_some(Value {
                        start,
                        end: i,
                        quoted: true,
                        backtick: false,
                    });
                }
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
        return None;
    }
    if matches!(first, b'"' | b'\'' | b'`') {
        let start = pos + 1;
        let mut i = start;
        while i < b.len() {
            let c = b[i];
            if c == b'\n' || c == b'\r' {
                return None;
            }
            if c == b'\\' && first != b'\'' {
                i += 2;
                continue;
            }
            if c == first {
                return (i > start).then_some(Value {
                    start,
                    end: i,
                    quoted: true,
                    backtick: first == b'`',
                });
            }
            i += 1;
        }
        return None;
    }
    let mut i = pos;
    while i < b.len() && !is_unquoted_terminator(b[i]) {
        i += 1;
    }
    // A password with bracket symbols (`m{{h}o)p${e]…}}`): the run to the next blank, less
    // trailing punctuation, when its brackets close in the wrong kind, which code never does.
    let word_end = b[pos..]
        .iter()
        .position(u8::is_ascii_whitespace)
        .map_or(b.len(), |n| pos + n);
    if word_end > i {
        let mut end = word_end;
        while end > i && matches!(b[end - 1], b',' | b';' | b'\'' | b'"' | b'`') {
            end -= 1;
        }
        if text.get(pos..end).is_some_and(misnested_brackets) {
            i = end;
        }
    }
    (i > pos).then_some(Value {
        start: pos,
        end: i,
        quoted: false,
        backtick: false,
    })
}

/// The part of `value` to redact, if any, after the look-alike rules; `follow` allows one step
/// past a type hint (`password: str = "x"`) or into a prefixed string literal (`b"x"`).
fn judge(text: &str, value: Value, strength: Strength, follow: bool) -> Option<Value> {
    let v = &text[value.start..value.end];
    let bytes = text.as_bytes();
    if follow && !value.quoted {
        // Python string prefixes: b"…", r'…', f"…".
        if matches!(
            v,
            "b" | "r" | "u" | "f" | "br" | "rb" | "fr" | "rf" | "B" | "R" | "U" | "F" | "@"
        ) && matches!(bytes.get(value.end), Some(b'"' | b'\''))
        {
            let inner = parse_value(text, value.end)?;
            if v.contains(['f', 'F']) && text[inner.start..inner.end].contains('{') {
                return None;
            }
            return judge(text, inner, strength, false);
        }
        // A type hint with a default: `password: str = "hunter2"`.
        if is_type_name(v) {
            let mut i = value.end;
            while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
                i += 1;
            }
            if bytes.get(i) == Some(&b'=') && bytes.get(i + 1) != Some(&b'=') {
                i += 1;
                while bytes.get(i).is_some_and(|b| *b == b' ' || *b == b'\t') {
                    i += 1;
                }
                let next = parse_value(text, i)?;
                return judge(text, next, strength, false);
            }
            return None;
        }
    }
    // `print("Password: ", end="")`: the "value" is the text between two string literals.
    let between_literals =
        value.quoted && v.starts_with(|c: char| c.is_whitespace() || ",;)+.".contains(c));
    // Inline code after a colon in prose ("the secret: `x = y`") is only a value when it is
    // one credential-looking word.
    // `"<xsd:element name="Agency…"`: a quote that closes nothing, as an identifier follows.
    let glued = value.quoted
        && !value.backtick
        && matches!(bytes.get(value.end), Some(b'"' | b'\''))
        && bytes
            .get(value.end + 1)
            .is_some_and(|b| b.is_ascii_alphanumeric());
    let prose_code = value.backtick
        && (v.contains(|c: char| c.is_whitespace() || c == '=' || c == ':') || !credential_like(v));
    if v.trim().is_empty()
        || between_literals
        || glued
        || prose_code
        || is_placeholder(v)
        || is_keyword(v)
        || is_short_number(v)
        || is_secret_name(v)
        || (!value.quoted
            && ((is_code(v) && !misnested_brackets(v))
                || is_type_name(v)
                || is_stopword(v)
                || opens_block(bytes, value.end)))
    {
        return None;
    }
    let ok = match strength {
        Strength::Normal => true,
        Strength::Weak => v.len() >= 8 && credential_like(v),
        Strength::Cli => v.len() >= 6 && credential_like(v) && !v.starts_with('-'),
        Strength::Blob => {
            v.len() >= 100
                && v.bytes().all(|b| is_base64_byte(b) || b == b'=')
                && has_digit(v)
                && has_both_cases(v)
        }
        Strength::KeyLike => {
            v.len() >= 16
                && has_digit_and_letter(v)
                && longest_alnum_run(v) >= 12
                && !v.contains(char::is_whitespace)
                && !v.contains('/')
        }
    };
    ok.then_some(value)
}

/// Brackets that close in the wrong kind (`{)`, `(]`): symbols of a password, not code, which
/// may be cut off (`getToken(`) but never closes `(` with `}`.
fn misnested_brackets(s: &str) -> bool {
    let mut open = Vec::new();
    for b in s.bytes() {
        match b {
            b'(' | b'[' | b'{' => open.push(b),
            b')' | b']' | b'}' => {
                let want = match b {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                match open.pop() {
                    Some(o) if o == want => {}
                    Some(_) => return true,
                    None => {}
                }
            }
            _ => {}
        }
    }
    false
}

fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

fn has_both_cases(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_uppercase()) && s.bytes().any(|b| b.is_ascii_lowercase())
}

fn has_digit_and_letter(s: &str) -> bool {
    has_digit(s) && s.bytes().any(|b| b.is_ascii_alphabetic())
}

fn longest_alnum_run(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// A credential rather than a word: a digit, mixed case, or a symbol.
fn credential_like(s: &str) -> bool {
    has_digit(s)
        || has_both_cases(s)
        || s.bytes()
            .any(|b| !b.is_ascii_alphanumeric() && !matches!(b, b'-' | b'_' | b'.' | b' '))
}

/// A key block holds base64, not prose that mentions the BEGIN and END lines.
fn has_key_material(s: &str) -> bool {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='))
        .any(|run| run.len() >= 16)
}

fn valid_loose_bearer(s: &str) -> bool {
    has_digit_and_letter(s) && !is_placeholder(s) && !is_secret_name(s)
}

fn valid_header_credentials(s: &str) -> bool {
    const SCHEMES: &[&str] = &[
        "bearer",
        "basic",
        "token",
        "digest",
        "negotiate",
        "ntlm",
        "apikey",
    ];
    s.len() >= 8
        && !SCHEMES.iter().any(|w| s.eq_ignore_ascii_case(w))
        && !s.bytes().all(|b| b.is_ascii_lowercase())
        && !is_placeholder(s)
        && !is_secret_name(s)
        && !is_type_like(s)
        && credential_like(s)
}

fn valid_url_password(s: &str) -> bool {
    !is_placeholder(s) && !is_secret_name(s)
}

fn valid_url_user_token(s: &str) -> bool {
    has_digit_and_letter(s) && longest_alnum_run(s) >= 16 && !is_placeholder(s)
}

/// `true`, `null`, … (any case).
fn is_keyword(v: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "true",
        "false",
        "null",
        "none",
        "nil",
        "undefined",
        "yes",
        "no",
        "on",
        "off",
    ];
    KEYWORDS.iter().any(|k| v.eq_ignore_ascii_case(k))
}

/// A number of at most 6 digits (a setting, not a secret).
fn is_short_number(v: &str) -> bool {
    let (digits, hex) = match v.strip_prefix("0x") {
        Some(h) => (h, true),
        None => (v, false),
    };
    (1..=6).contains(&digits.len())
        && digits.bytes().all(|b| {
            if hex {
                b.is_ascii_hexdigit()
            } else {
                b.is_ascii_digit()
            }
        })
}

/// After `key:`, an unquoted value that is a type (`token: Literal`), a struct-literal field
/// (`token: cached,`) or the first word of a sentence (`ACCESS_KEY: alias for …`).
fn colon_code_or_prose(text: &str, v: Value) -> bool {
    let value = &text[v.start..v.end];
    let rest = &text[v.end..];
    if is_type_like(value) || rest.starts_with([',', ';', ')', '}']) {
        return true;
    }
    let word = value.bytes().all(|b| b.is_ascii_lowercase());
    let more = rest.trim_start_matches([' ', '\t']);
    word && more.len() < rest.len() && more.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// A type name or a capitalised word — `Boolean`, `CFStringRef`, `T`, `C1`, `Tries` — rather
/// than a random token (`AbX9kLm2Qr`, `K7GHQ2MZPX`).
fn is_type_like(v: &str) -> bool {
    let b = v.as_bytes();
    if b.is_empty() || b.len() > 40 || !b[0].is_ascii_uppercase() {
        return false;
    }
    if !b.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    words(v).iter().all(|w| {
        let w = w.as_bytes();
        let rest = &w[1..];
        let letters = rest.iter().take_while(|b| b.is_ascii_lowercase()).count();
        rest[letters..].iter().all(u8::is_ascii_digit)
            || (w.len() <= 5 && w.iter().all(u8::is_ascii_uppercase))
            || (w.len() <= 3 && rest.iter().all(u8::is_ascii_digit))
    })
}

/// Not an obviously made-up example: no run of 8 ascending letters (`abcdefgh`, `klmnopqr`)
/// and no character repeated 8 times (`aaaaaaaa`).
fn not_made_up(s: &str) -> bool {
    let b = s.as_bytes();
    let ascending = b
        .windows(8)
        .any(|w| w.iter().all(u8::is_ascii_lowercase) && w.windows(2).all(|p| p[1] == p[0] + 1));
    let repeated = b.windows(8).any(|w| w.iter().all(|&c| c == w[0]));
    !ascending && !repeated
}

/// The byte ranges of the PEM blocks in `text` whose label names public material (a
/// `CERTIFICATE`, a `PUBLIC KEY`, a `PGP PUBLIC KEY BLOCK`, an `X509 CRL`…: anything but a
/// private, secret or encrypted key), from `-----BEGIN L-----` to its `-----END L-----`.
fn public_pem_blocks(text: &str) -> Vec<Range<usize>> {
    const BEGIN: &str = "-----BEGIN ";
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = text[at..].find(BEGIN) {
        let start = at + i;
        let rest = &text[start + BEGIN.len()..];
        let Some(label) = rest
            .find("-----")
            .map(|n| &rest[..n])
            .filter(|l| !l.is_empty() && l.len() <= 48 && !l.contains('\n'))
        else {
            at = start + BEGIN.len();
            continue;
        };
        let end_marker = format!("-----END {label}-----");
        let Some(j) = text[start..].find(&end_marker) else {
            at = start + BEGIN.len();
            continue;
        };
        let end = start + j + end_marker.len();
        let upper = label.to_ascii_uppercase();
        if !["PRIVATE", "SECRET", "ENCRYPTED"]
            .iter()
            .any(|w| upper.contains(w))
        {
            out.push(start..end);
        }
        at = end;
    }
    out
}

/// A value made up by hand rather than generated, whoever found it: mostly runs
/// (`1234567890`, `abcd`, `ABCD`, `ZZZZ`, `QQQQ`) or one short chunk over and over
/// (`abcd1234abcd1234…`). A generated secret's neighbouring characters follow or repeat each
/// other about once in thirty; here at least every other pair does.
fn made_up(s: &str) -> bool {
    let b: Vec<u8> = s.bytes().filter(u8::is_ascii_alphanumeric).collect();
    if b.len() < 12 || b.len() > 512 {
        return false;
    }
    let class = |c: u8| (c.is_ascii_digit(), c.is_ascii_lowercase());
    let runs = b
        .windows(2)
        .filter(|p| {
            p[0] == p[1]
                || (p[1] == p[0] + 1 && class(p[0]) == class(p[1]))
                || (p[0], p[1]) == (b'9', b'0')
        })
        .count();
    if runs * 2 >= b.len() - 1 {
        return true;
    }
    (1..=b.len() / 3).any(|p| b.iter().zip(&b[p..]).all(|(x, y)| x == y))
}

/// A value that stands for a secret rather than being one.
fn is_placeholder(v: &str) -> bool {
    const WORDS: &[&str] = &[
        "password",
        "passwd",
        "pass",
        "secret",
        "token",
        "redacted",
        "<redacted>",
        "placeholder",
        "replace_me",
        "replace-me",
        "replaceme",
        "todo",
        "tbd",
        "fixme",
        "n/a",
        "value",
        "example",
    ];
    if v.starts_with(PLACEHOLDER_PREFIX) || WORDS.iter().any(|w| v.eq_ignore_ascii_case(w)) {
        return true;
    }
    // Documentation examples (`AKIAIOSFODNN7EXAMPLE`), masks inside a value (`hf_xxxxxx…`),
    // made-up sequences (`sk_abcdefghijklmnop…`, `0000000000`) and elided values (`ops_eyJ…`).
    if v.contains("EXAMPLE")
        || v.contains("xxxxxx")
        || v.contains("XXXXXX")
        || !not_made_up(v)
        || v.ends_with("...")
        || v.ends_with('…')
    {
        return true;
    }
    // Masks: `***`, `xxxx`, `...`, `XXXX-XXXX`.
    if v.chars()
        .all(|c| matches!(c, '*' | 'x' | 'X' | '.' | '-' | '_' | '#' | '•' | '…'))
    {
        return true;
    }
    // `<token>`, `{token}`, `{{ .Values.token }}`, `${TOKEN}`.
    if (v.starts_with('<') && v.ends_with('>')) || v.starts_with('{') || has_template(v) {
        return true;
    }
    // `%VAR%` (Windows, NuGet).
    if let Some(name) = v.strip_prefix('%').and_then(|r| r.strip_suffix('%'))
        && is_identifier(name)
    {
        return true;
    }
    if v.starts_with("$(") || v.starts_with("%(") || v == "%s" {
        return true;
    }
    // `$VAR`: one-case names only, so `$ecretP4ss` is still a password.
    if let Some(name) = v.strip_prefix('$')
        && !name.is_empty()
        && name.bytes().all(is_word)
        && (name.bytes().all(|b| !b.is_ascii_lowercase() || b == b'_')
            || name.bytes().all(|b| !b.is_ascii_uppercase()))
    {
        return true;
    }
    let lower = v.to_ascii_lowercase();
    if let Some(rest) = v.get(4..)
        && lower.starts_with("your")
        && (rest.starts_with(['-', '_', ' ', '.'])
            || rest.starts_with(|c: char| c.is_ascii_uppercase()))
    {
        return true;
    }
    // An elided example: `ghp_…`, `sk-...`.
    if let Some(head) = v.strip_suffix('…').or_else(|| v.strip_suffix("..."))
        && head.len() <= 8
    {
        return true;
    }
    lower.ends_with("_here") || lower.ends_with("-here")
}

/// Whether `v` holds a template expansion: `${NAME}` or `{{ … }}` with no brace inside.
fn has_template(v: &str) -> bool {
    let closed = |open: &str, close: &str| {
        v.match_indices(open).any(|(i, _)| {
            let rest = &v[i + open.len()..];
            rest.find(close).is_some_and(|j| {
                j > 0
                    && rest[..j]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b" _.:-|'\"$/".contains(&b))
            })
        })
    };
    closed("${", "}") || closed("{{", "}}")
}

/// A JWT's first part decodes (base64url) to a JSON object.
fn jwt_header_is_json(s: &str) -> bool {
    let header = s.split('.').next().unwrap_or_default();
    let decoded = base64url_decode(header);
    let t = decoded.trim_ascii();
    t.starts_with(b"{") && t.ends_with(b"}")
}

/// Lenient base64url (or base64) decoding without padding; stops at the first other byte.
fn base64url_decode(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => break,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Type names seen after `name:` in Python, TypeScript and Rust signatures.
fn is_type_name(v: &str) -> bool {
    const TYPES: &[&str] = &[
        "str",
        "string",
        "String",
        "bytes",
        "int",
        "bool",
        "boolean",
        "number",
        "any",
        "Any",
        "unknown",
        "object",
        "Object",
        "char",
        "impl",
        "dyn",
        "Option",
        "Optional",
        "Secret",
        "SecretStr",
        "SecretString",
        "SecretBox",
        "Box",
        "Arc",
        "Rc",
        "Vec",
        "Cow",
        "Token",
        "Text",
        "Union",
        "List",
        "Dict",
        "Mapping",
        "Sequence",
        "u8",
        "u32",
        "u64",
        "i32",
        "i64",
        "usize",
    ];
    TYPES.contains(&v)
}

/// Prose words that follow `token:` or `auth:` in ordinary sentences.
fn is_stopword(v: &str) -> bool {
    const STOPWORDS: &[&str] = &[
        "the", "a", "an", "is", "are", "was", "be", "it", "its", "this", "that", "to", "of", "in",
        "for", "see", "use", "set", "not", "and", "or", "required", "optional", "unset", "empty",
        "missing", "invalid", "expired", "provided", "present", "hidden", "masked", "read",
        "write", "self", "this", "if", "match", "await", "new",
    ];
    STOPWORDS.iter().any(|w| v.eq_ignore_ascii_case(w))
}

fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b'$')
        && b.all(|c| is_word(c) || c == b'$')
}

/// An unquoted value that is an expression in code, not data.
fn is_code(v: &str) -> bool {
    if v.contains(['(', '[', '{']) || v.contains("::") || v.contains("->") {
        return true;
    }
    // References, pointers, decorators, private names: `&str`, `*mut`, `@token`, `__u32`.
    if v.starts_with(['&', '@', '*', '_']) {
        return true;
    }
    // Grammar (ABNF repetition): `token = 1*tchar`.
    if v.trim_start_matches(|c: char| c.is_ascii_digit())
        .starts_with('*')
    {
        return true;
    }
    // Dotted paths: `self.token`, `process.env.GITHUB_TOKEN`.
    if v.contains('.') && v.split('.').all(is_identifier) {
        return true;
    }
    // Pure punctuation: YAML `|`, `>-`, `-`.
    !v.bytes().any(|b| b.is_ascii_alphanumeric()) && v.is_ascii()
}

/// An identifier that itself names a secret — a variable or a field name, not its value:
/// `password=password`, `token: accessToken`, `Kind::Token => "github_token"`.
fn is_secret_name(v: &str) -> bool {
    if !is_identifier(v) || (longest_alnum_run(v) >= 20 && has_digit(v) && has_both_cases(v)) {
        return false;
    }
    // Whole words only: `abc123secret` is a value, `githubToken` a name.
    const NAMES: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "pass",
        "pwd",
        "secret",
        "token",
        "apikey",
        "key",
        "auth",
    ];
    words(v).iter().any(|w| in_ci(NAMES, w))
}

/// Whether the next non-blank byte at or after `pos` opens a block or a call: `Value {`.
fn opens_block(bytes: &[u8], pos: usize) -> bool {
    let next = bytes[pos.min(bytes.len())..]
        .iter()
        .find(|&&b| b != b' ' && b != b'\t');
    matches!(next, Some(b'{' | b'('))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

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
}
