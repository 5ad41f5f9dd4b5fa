//! `freecode config list|get|set|path`: the keys of `config.json` freecode knows, in one
//! place ([`KEYS`]) with their defaults.
//!
//! `set` validates the value for its key and rewrites the file atomically (0600), keeping every
//! key it does not know; a file that does not parse is never overwritten (the error names its
//! line and column, as for every command that reads it).

use std::io::Write;

use freecode_store::Home;
use serde_json::{Map, Value, json};

use crate::UserError;
use crate::ops::{ConfigEntry, ConfigPath};
use crate::render::{print_json, print_line};

/// What a key's value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An `http://` or `https://` URL.
    Url,
    /// Any non-empty string.
    Text,
    /// A whole number of at least 1.
    Positive,
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
];

/// `freecode config …`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Every known key: its value, or its default.
    List {
        /// One JSON array of {key, value, default, source, about}.
        #[arg(long)]
        json: bool,
    },
    /// Print one key's value (else its default; exit 1 when it has neither).
    Get {
        /// The key, e.g. syncEndpoint or current.model.
        key: String,
        /// {key, value, default, source, about}, the value shown even when secret.
        #[arg(long)]
        json: bool,
    },
    /// Set one key, keeping every other key of the file.
    Set {
        /// The key, e.g. syncEndpoint or current.model.
        key: String,
        /// The value (checked for the key: a URL, a number, a name).
        value: String,
        /// The key as now set: {key, value, default, source, about}.
        #[arg(long)]
        json: bool,
    },
    /// Print the path of config.json.
    Path {
        /// {path}.
        #[arg(long)]
        json: bool,
    },
}

/// The entry of key `k` in `config`; a secret's value replaced by a note unless `reveal`.
fn entry(k: &Key, config: &Value, reveal: bool) -> ConfigEntry {
    let value = lookup(config, k.name).cloned();
    let source = if value.is_some() {
        "config.json"
    } else {
        "default"
    };
    let value = match (value, k.secret && !reveal) {
        (Some(_), true) => Some(json!("(set, hidden: use `config get`)")),
        (v, _) => v,
    };
    ConfigEntry {
        key: k.name.to_owned(),
        value,
        default: k.default.map(str::to_owned),
        source: source.to_owned(),
        about: k.about.to_owned(),
    }
}

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

fn known(name: &str) -> anyhow::Result<&'static Key> {
    KEYS.iter().find(|k| k.name == name).ok_or_else(|| {
        let names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        UserError(format!(
            "unknown key {name:?}; the keys are {}",
            names.join(", ")
        ))
        .into()
    })
}

/// A value as printed: strings bare, anything else as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn parse_value(key: &Key, raw: &str) -> anyhow::Result<Value> {
    let raw = raw.trim();
    let bad = |what: &str| -> anyhow::Error {
        UserError(format!("{} must be {what}, not {raw:?}", key.name)).into()
    };
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
    }
}

/// Sets the dotted `key` of `config` (an object, or null for no file) to `value`, keeping
/// every other key.
fn set_in(config: Value, key: &str, value: Value) -> anyhow::Result<Value> {
    let mut root = match config {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut parts: Vec<&str> = key.split('.').collect();
    let last = parts.pop().unwrap_or(key);
    let mut cur = &mut root;
    for part in parts {
        let entry = cur
            .entry(part.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            return Err(UserError(format!(
                "cannot set {key}: {part} in config.json is {}, not an object",
                shown(entry)
            ))
            .into());
        }
        cur = match entry {
            Value::Object(m) => m,
            _ => return Err(UserError(format!("cannot set {key}")).into()),
        };
    }
    cur.insert(last.to_owned(), value);
    Ok(Value::Object(root))
}

impl ConfigCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        match self {
            Self::Path { json } => {
                let path = home.config_file();
                if json {
                    return print_json(&ConfigPath { path });
                }
                print_line(&path.display().to_string())
            }
            Self::List { json } => {
                let config = home.read_config()?;
                let rows: Vec<ConfigEntry> =
                    KEYS.iter().map(|k| entry(k, &config, false)).collect();
                if json {
                    return print_json(&rows);
                }
                let mut out = std::io::stdout().lock();
                for (k, row) in KEYS.iter().zip(&rows) {
                    let value = match (&row.value, k.default) {
                        (None, Some(d)) => format!("{d} (default)"),
                        (None, None) => "(not set)".to_owned(),
                        (Some(v), _) => shown(v),
                    };
                    writeln!(out, "{:<18} {value}", k.name)?;
                    writeln!(out, "{:<18} {}", "", k.about)?;
                }
                Ok(())
            }
            Self::Get { key, json } => {
                let k = known(&key)?;
                let config = home.read_config()?;
                let row = entry(k, &config, true);
                if row.value.is_none() && row.default.is_none() {
                    return Err(UserError(format!(
                        "{} is not set in {} and has no default",
                        k.name,
                        home.config_file().display()
                    ))
                    .into());
                }
                if json {
                    return print_json(&row);
                }
                match (&row.value, &row.default) {
                    (Some(v), _) => print_line(&shown(v)),
                    (None, Some(d)) => print_line(d),
                    (None, None) => Ok(()),
                }
            }
            Self::Set { key, value, json } => {
                let k = known(&key)?;
                let value = parse_value(k, &value)?;
                // A file that does not parse is refused here, never replaced.
                let config = home.read_config()?;
                let config = set_in(config, k.name, value)?;
                home.ensure()?;
                let mut bytes = serde_json::to_vec_pretty(&config)?;
                bytes.push(b'\n');
                freecode_store::fsutil::write_atomic(&home.config_file(), &bytes, true)?;
                let row = entry(k, &config, false);
                if json {
                    return print_json(&row);
                }
                print_line(&format!(
                    "set {} to {} in {}",
                    k.name,
                    row.value.as_ref().map(shown).unwrap_or_default(),
                    home.config_file().display()
                ))
            }
        }
    }
}
