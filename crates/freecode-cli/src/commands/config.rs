//! `freecode config list|get|set|path`: the keys of `config.json` ([`freecode_ops::keys`]) and
//! the operations on it ([`freecode_ops::config`]), printed for a person or as JSON.

use std::io::Write;

use freecode_ops::config;
use freecode_ops::keys::{KEYS, shown};
use freecode_store::Home;

use crate::render::{print_json, print_line};

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

impl ConfigCommand {
    /// Runs the command.
    pub fn run(self, home: &Home) -> anyhow::Result<()> {
        match self {
            Self::Path { json } => {
                let path = config::path(home);
                if json {
                    return print_json(&path);
                }
                print_line(&path.path.display().to_string())
            }
            Self::List { json } => {
                let rows = config::list(home)?;
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
                let row = config::get(home, &key)?;
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
                let row = config::set(home, &key, &value)?;
                if json {
                    return print_json(&row);
                }
                print_line(&format!(
                    "set {} to {} in {}",
                    row.key,
                    row.value.as_ref().map(shown).unwrap_or_default(),
                    home.config_file().display()
                ))
            }
        }
    }
}
