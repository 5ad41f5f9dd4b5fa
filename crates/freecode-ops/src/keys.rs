//! The keys of `config.json` freecode knows, in one place ([`KEYS`]) with their defaults, and
//! how a value is read from the file ([`lookup`], [`lookup_str`], [`lookup_bool`]) or checked
//! for its key ([`parse`]).
//!
//! A leaf: it names no other module of this crate but [`crate::error`], so every module may
//! read a key (`meaning`'s embedder, `home_sync`'s exclusions, the sessions' model) without
//! reaching the operations on the file ([`crate::config`]).

use serde_json::{Value, json};

use crate::error::{Error, Result};

/// The floor of a strong hit by meaning when `embed.minSimilarity` is not set, as `config list`
/// shows it: calibrated on the development query set and nonsense queries with
/// all-MiniLM-L6-v2 (`cargo bench -p freecode-ops --bench recall`, docs/recall.md).
pub const MIN_SIMILARITY_DEFAULT: &str = "0.30";

/// `embed.readTokens` when it is not set, as `config list` shows it: the local embedder's
/// [`freecode_embed::local::DEFAULT_READ_TOKENS`].
pub const READ_TOKENS_DEFAULT: &str = "128";

/// The embedders `embed.provider` names.
pub const PROVIDERS: &[&str] = &["local", "openai"];

/// What a key's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An `http://` or `https://` URL.
    Url,
    /// Any non-empty string.
    Text,
    /// A whole number of at least 1.
    Positive,
    /// `true` or `false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    Bool,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// A number from 0 to 1.
    Fraction,
}

/// One key of `config.json`.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// Its name; a dot nests (`current.model` is `{"current": {"model": …}}`).
    pub name: &'static str,
    /// What its value must be.
    pub kind: Kind,
    /// The value used when it is not set, if any.
    pub default: Option<&'static str>,
    /// Whether `list` hides its value.
    pub secret: bool,
    /// What it does.
    pub about: &'static str,
}

/// Every key freecode reads from `config.json`, with its default.
pub const KEYS: &[Key] = &[
    Key {
        name: "syncEndpoint",
        kind: Kind::Url,
        default: None,
        secret: false,
        about: "the share server `session export` uploads to (none: pass --to or --file)",
    },
    Key {
        name: "syncApiKey",
        kind: Kind::Text,
        default: None,
        secret: true,
        about: "bearer token sent with uploads, imports and revocations",
    },
    Key {
        name: "syncUrlExpiryDays",
        kind: Kind::Positive,
        default: Some("7"),
        secret: false,
        about: "days a share lives unless `--expires` says otherwise",
    },
    Key {
        name: "current.provider",
        kind: Kind::Text,
        default: None,
        secret: false,
        about: "provider of new sessions: openai or scripted (none: a base URL or \
                OPENAI_API_KEY means openai, else scripted with a notice)",
    },
    Key {
        name: "current.model",
        kind: Kind::Text,
        default: None,
        secret: false,
        about: "model of new sessions when --model is not given (a session keeps its pin)",
    },
    Key {
        name: "baseUrl",
        kind: Kind::Url,
        default: None,
        secret: false,
        about: "base URL of the OpenAI-compatible endpoint when --base-url and \
                OPENAI_BASE_URL are not set (none: the OpenAI API's public endpoint)",
    },
    Key {
        name: "embed.provider",
        kind: Kind::OneOf(PROVIDERS),
        default: None,
        secret: false,
        about: "the embedder search by meaning uses: local (a model directory, embed.path) or \
                openai (an OpenAI-compatible endpoint, embed.baseUrl and embed.model); none: \
                search finds words only",
    },
    Key {
        name: "embed.path",
        kind: Kind::Text,
        default: None,
        secret: false,
        about: "the local embedder's model directory (a sentence-transformers BERT: \
                config.json, tokenizer.json, model.safetensors)",
    },
    Key {
        name: "embed.baseUrl",
        kind: Kind::Url,
        default: None,
        secret: false,
        about: "the embeddings endpoint (…/v1; POST {url}/embeddings) of embed.provider openai",
    },
    Key {
        name: "embed.model",
        kind: Kind::Text,
        default: None,
        secret: false,
        about: "the model the embeddings endpoint is asked for",
    },
    Key {
        name: "embed.apiKey",
        kind: Kind::Text,
        default: None,
        secret: true,
        about: "bearer token sent to the embeddings endpoint",
    },
    Key {
        name: "embed.readTokens",
        kind: Kind::Positive,
        default: Some(READ_TOKENS_DEFAULT),
        secret: false,
        about: "how many tokens of each chunk of conversation the local embedder reads (its \
                start: the request and the start of the answer; at most the model's sequence \
                length): more reads more of each turn and embeds fewer chunks a second (see \
                docs/recall.md)",
    },
    Key {
        name: "embed.minSimilarity",
        kind: Kind::Fraction,
        default: Some(MIN_SIMILARITY_DEFAULT),
        secret: false,
        about: "how near in meaning (cosine similarity, 0 to 1) a turn must be to a query to \
                be a strong hit by meaning: a turn found by meaning alone and less near is \
                shown as a weak hit (the nearest there is), and a search with no strong hit \
                exits 1 (the default is calibrated for all-MiniLM-L6-v2; see docs/recall.md)",
    },
    Key {
        name: "sync.exclude",
        kind: Kind::Text,
        default: None,
        secret: false,
        about: "project path globs, comma-separated, whose sessions `freecode sync` never \
                sends from this machine (e.g. `/work/secret/**,**/scratch`)",
    },
    Key {
        name: "sync.auto",
        kind: Kind::Bool,
        default: Some("false"),
        secret: false,
        about: "sync the home (`freecode sync now`) in the background after each turn of \
                `run` and `serve`, never holding the turn up",
    },
];

/// The value at a dotted `key` of `config`.
pub fn lookup<'a>(config: &'a Value, key: &str) -> Option<&'a Value> {
    key.split('.').try_fold(config, |v, part| v.get(part))
}

/// The trimmed, non-empty string at a dotted `key` of `config`.
pub fn lookup_str(config: &Value, key: &str) -> Option<String> {
    lookup(config, key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The boolean at a dotted `key` of `config` (a hand-edited `"true"` string counts).
pub fn lookup_bool(config: &Value, key: &str) -> Option<bool> {
    match lookup(config, key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Some(true),
            "false" | "no" | "off" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The key named `name`.
pub fn known(name: &str) -> Result<&'static Key> {
    KEYS.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        Error::Invalid(format!(
            "unknown key {name:?}; the keys are {}",
            names.join(", ")
        ))
    })
}

/// A value as printed: strings bare, anything else as JSON.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `raw` as the value of the known key `name`, checked as `config set` checks it.
pub fn parse(name: &str, raw: &str) -> Result<Value> {
    parse_value(known(name)?, raw)
}

pub(crate) fn parse_value(key: &Key, raw: &str) -> Result<Value> {
    let raw = raw.trim();
    let bad = |what: &str| Error::Invalid(format!("{} must be {what}, not {raw:?}", key.name));
    match key.kind {
        Kind::Url => {
            let ok = (raw.starts_with("https://") || raw.starts_with("http://"))
                && raw
                    .split_once("://")
                    .is_some_and(|(_, rest)| !rest.is_empty());
            if !ok {
                return Err(bad("an http:// or https:// URL"));
            }
            Ok(Value::String(raw.to_owned()))
        }
        Kind::Text if raw.is_empty() => Err(bad("a non-empty string")),
        Kind::Text => Ok(Value::String(raw.to_owned())),
        Kind::Positive => match raw.parse::<u64>() {
            Ok(n) if n > 0 => Ok(json!(n)),
            _ => Err(bad("a whole number of at least 1")),
        },
        Kind::Bool => match raw.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(Value::Bool(true)),
            "false" | "no" | "off" | "0" => Ok(Value::Bool(false)),
            _ => Err(bad("true or false")),
        },
        Kind::OneOf(words) if words.contains(&raw) => Ok(Value::String(raw.to_owned())),
        Kind::OneOf(words) => Err(bad(&format!("one of: {}", words.join(", ")))),
        Kind::Fraction => match raw.parse::<f64>() {
            Ok(x) if (0.0..=1.0).contains(&x) => Ok(json!(x)),
            _ => Err(bad("a number from 0 to 1")),
        },
    }
}
