//! Values: whether what an assignment's key points to is a secret — parsed from the text
//! (quoted or not), then judged against placeholders, templates, code, type names, public
//! keys and made-up examples, and held to what a credential of its kind looks like.

use std::ops::Range;

use super::keys::{Strength, in_ci, words};
use super::{PLACEHOLDER_PREFIX, is_base64_byte, is_word};

/// A candidate value: a byte range, and whether it was inside quotes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Value {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) quoted: bool,
    /// Quoted in backticks: a JS template literal, or inline code in Markdown prose.
    pub(super) backtick: bool,
}

pub(super) fn is_unquoted_terminator(b: u8) -> bool {
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
pub(super) fn parse_value(text: &str, pos: usize) -> Option<Value> {
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
pub(super) fn judge(text: &str, value: Value, strength: Strength, follow: bool) -> Option<Value> {
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
pub(super) fn misnested_brackets(s: &str) -> bool {
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

pub(super) fn has_digit(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit())
}

pub(super) fn has_both_cases(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_uppercase()) && s.bytes().any(|b| b.is_ascii_lowercase())
}

pub(super) fn has_digit_and_letter(s: &str) -> bool {
    has_digit(s) && s.bytes().any(|b| b.is_ascii_alphabetic())
}

pub(super) fn longest_alnum_run(s: &str) -> usize {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::len)
        .max()
        .unwrap_or(0)
}

/// A credential rather than a word: a digit, mixed case, or a symbol.
pub(super) fn credential_like(s: &str) -> bool {
    has_digit(s)
        || has_both_cases(s)
        || s.bytes()
            .any(|b| !b.is_ascii_alphanumeric() && !matches!(b, b'-' | b'_' | b'.' | b' '))
}

/// A key block holds base64, not prose that mentions the BEGIN and END lines.
pub(super) fn has_key_material(s: &str) -> bool {
    s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || c == '='))
        .any(|run| run.len() >= 16)
}

pub(super) fn valid_loose_bearer(s: &str) -> bool {
    has_digit_and_letter(s) && !is_placeholder(s) && !is_secret_name(s)
}

pub(super) fn valid_header_credentials(s: &str) -> bool {
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

pub(super) fn valid_url_password(s: &str) -> bool {
    !is_placeholder(s) && !is_secret_name(s)
}

pub(super) fn valid_url_user_token(s: &str) -> bool {
    has_digit_and_letter(s) && longest_alnum_run(s) >= 16 && !is_placeholder(s)
}

/// `true`, `null`, … (any case).
pub(super) fn is_keyword(v: &str) -> bool {
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
pub(super) fn is_short_number(v: &str) -> bool {
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
pub(super) fn colon_code_or_prose(text: &str, v: Value) -> bool {
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
pub(super) fn is_type_like(v: &str) -> bool {
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
pub(super) fn not_made_up(s: &str) -> bool {
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
pub(super) fn public_pem_blocks(text: &str) -> Vec<Range<usize>> {
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
pub(super) fn made_up(s: &str) -> bool {
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
pub(super) fn is_placeholder(v: &str) -> bool {
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
pub(super) fn has_template(v: &str) -> bool {
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
pub(super) fn jwt_header_is_json(s: &str) -> bool {
    let header = s.split('.').next().unwrap_or_default();
    let decoded = base64url_decode(header);
    let t = decoded.trim_ascii();
    t.starts_with(b"{") && t.ends_with(b"}")
}

/// Lenient base64url (or base64) decoding without padding; stops at the first other byte.
pub(super) fn base64url_decode(s: &str) -> Vec<u8> {
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
pub(super) fn is_type_name(v: &str) -> bool {
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
pub(super) fn is_stopword(v: &str) -> bool {
    const STOPWORDS: &[&str] = &[
        "the", "a", "an", "is", "are", "was", "be", "it", "its", "this", "that", "to", "of", "in",
        "for", "see", "use", "set", "not", "and", "or", "required", "optional", "unset", "empty",
        "missing", "invalid", "expired", "provided", "present", "hidden", "masked", "read",
        "write", "self", "this", "if", "match", "await", "new",
    ];
    STOPWORDS.iter().any(|w| v.eq_ignore_ascii_case(w))
}

pub(super) fn is_identifier(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b'$')
        && b.all(|c| is_word(c) || c == b'$')
}

/// An unquoted value that is an expression in code, not data.
pub(super) fn is_code(v: &str) -> bool {
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
pub(super) fn is_secret_name(v: &str) -> bool {
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
pub(super) fn opens_block(bytes: &[u8], pos: usize) -> bool {
    let next = bytes[pos.min(bytes.len())..]
        .iter()
        .find(|&&b| b != b' ' && b != b'\t');
    matches!(next, Some(b'{' | b'('))
}
