//! `config list|get|set|path`: the operations on `config.json`, over the keys of
//! [`crate::keys`].
//!
//! [`set`] validates the value for its key and rewrites the file atomically (0600), keeping
//! every key it does not know; a file that does not parse is never overwritten (the error names
//! its line and column, as for every operation that reads it).

use freecode_store::Home;
use serde_json::{Map, Value, json};

use crate::error::{Error, Result};
use crate::keys::{KEYS, Key, known, lookup, lookup_str, parse_value, shown};
use crate::types::{ConfigEntry, ConfigPath};

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

/// Sets the dotted `key` of `config` (an object, or null for no file) to `value`, keeping
/// every other key.
fn set_in(config: Value, key: &str, value: Value) -> Result<Value> {
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
            return Err(Error::Invalid(format!(
                "cannot set {key}: {part} in config.json is {}, not an object",
                shown(entry)
            )));
        }
        cur = match entry {
            Value::Object(m) => m,
            _ => return Err(Error::Invalid(format!("cannot set {key}"))),
        };
    }
    cur.insert(last.to_owned(), value);
    Ok(Value::Object(root))
}

/// The path of `config.json` (it may not exist yet).
pub fn path(home: &Home) -> ConfigPath {
    ConfigPath {
        path: home.config_file(),
    }
}

/// Every known key: its value (a secret's hidden), or its default.
pub fn list(home: &Home) -> Result<Vec<ConfigEntry>> {
    let config = home.read_config()?;
    Ok(KEYS.iter().map(|k| entry(k, &config, false)).collect())
}

/// Key `key`: its value (shown even when secret), or its default; one with neither is an
/// error naming the file.
pub fn get(home: &Home, key: &str) -> Result<ConfigEntry> {
    let k = known(key)?;
    let config = home.read_config()?;
    let row = entry(k, &config, true);
    if row.value.is_none() && row.default.is_none() {
        return Err(Error::Invalid(format!(
            "{} is not set in {} and has no default",
            k.name,
            home.config_file().display()
        )));
    }
    Ok(row)
}

/// Sets key `key` to `value` (checked for the key), keeping every other key of the file; the
/// key as now set.
pub fn set(home: &Home, key: &str, value: &str) -> Result<ConfigEntry> {
    let k = known(key)?;
    let value = parse_value(k, value)?;
    // A file that does not parse is refused here, never replaced.
    let config = home.read_config()?;
    let config = set_in(config, k.name, value)?;
    home.ensure()?;
    let mut bytes = serde_json::to_vec_pretty(&config)?;
    bytes.push(b'\n');
    freecode_store::fsutil::write_atomic(&home.config_file(), &bytes, true)?;
    Ok(entry(k, &config, false))
}

/// The provider and model new sessions take when none is given (`current.provider`,
/// `current.model`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Current {
    /// `current.provider`.
    pub provider: Option<String>,
    /// `current.model`.
    pub model: Option<String>,
}

/// `current.provider` and `current.model` of `home`'s `config.json` (which must parse).
pub fn current(home: &Home) -> Result<Current> {
    let config = home.read_config()?;
    Ok(Current {
        provider: lookup_str(&config, "current.provider"),
        model: lookup_str(&config, "current.model"),
    })
}
