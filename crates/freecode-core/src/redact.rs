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
use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::Regex;

mod assignments;
mod context;
mod detectors;
pub mod entropy;
mod formats;
pub mod gitleaks;
mod keys;
pub mod probes;
mod values;

use assignments::{
    DECLARATION_KEYWORDS, MAX_EXTRA_PASSES, Repeats, assignment_windows, collect_kubernetes_secret,
    map_back, resolve, same_user_as_password, starts_argument,
};
use detectors::{
    ASSIGNMENT_PATTERN, AUTHORIZATION_PATTERN, CLI_FLAG_PATTERN, CLI_USER_PATTERN,
    COMPARISON_PATTERN, GATE_LITERALS, Gates, SIMPLE_SPECS, Simple, SimpleSpec, WINDOW_AHEAD,
    XML_KEY_VALUE_PATTERN, build, compile, compile_anchors, window,
};
use keys::{Strength, classify_key};
use values::{
    Value, colon_code_or_prose, is_secret_name, judge, made_up, parse_value, public_pem_blocks,
    valid_header_credentials,
};

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

    /// Every string of `v` (values, not keys) with its secrets replaced as [`Redactor::redact`]
    /// does; how many were replaced.
    pub fn redact_json(&self, v: &mut serde_json::Value) -> usize {
        match v {
            serde_json::Value::String(s) => {
                let (out, findings) = self.redact(s);
                if let Cow::Owned(o) = out {
                    *s = o;
                }
                findings.len()
            }
            serde_json::Value::Array(items) => items.iter_mut().map(|x| self.redact_json(x)).sum(),
            serde_json::Value::Object(map) => {
                map.iter_mut().map(|(_, x)| self.redact_json(x)).sum()
            }
            _ => 0,
        }
    }

    /// `text` redacted in place; how many secrets were replaced.
    pub fn redact_in_place(&self, text: &mut String) -> usize {
        let (out, findings) = self.redact(text);
        if let Cow::Owned(o) = out {
            *text = o;
        }
        findings.len()
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

fn push(out: &mut Vec<Finding>, kind: SecretKind, start: usize, end: usize) {
    if start < end {
        out.push(Finding { kind, start, end });
    }
}

#[cfg(test)]
mod tests;
