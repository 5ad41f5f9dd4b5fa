//! The redactor of a home: the built-in rules, or a user's own (`redact.toml` in the home,
//! gitleaks' format) merged over them ([`freecode_core::redact::gitleaks::RuleSet::with_user`]).
//!
//! The file is read as every file of the home is (no link followed, bounded), and compiled once
//! per process while it is unchanged (its size and modification time). A file that does not
//! parse, or a rule whose regex does not compile, is an error naming the file and the line:
//! nothing is exported with rules the user did not mean.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::SystemTime;

use freecode_core::redact::Redactor;
use freecode_core::redact::gitleaks::RuleSet;

use crate::error::{Result, StoreError};
use crate::fsutil;
use crate::home::Home;

/// `redact.toml`: a user's rules, in the home.
pub const RULES_FILE: &str = "redact.toml";
/// The most a rule file may hold.
pub const RULES_MAX_BYTES: u64 = 4 << 20;

/// A home's redactor: the process-wide one, or one with the user's rules.
#[derive(Debug, Clone)]
pub enum HomeRedactor {
    /// No `redact.toml`: the built-in rules.
    Builtin,
    /// The built-in rules with the user's merged over them.
    Custom(Arc<Redactor>),
}

impl HomeRedactor {
    /// The redactor itself.
    pub fn get(&self) -> &Redactor {
        match self {
            Self::Builtin => Redactor::global(),
            Self::Custom(r) => r,
        }
    }
}

/// A rule file's size and modification time: it is compiled again when either changes.
type Stamp = (u64, Option<SystemTime>);
/// The compiled rule files of this process, by path.
type Compiled = HashMap<PathBuf, (Stamp, Arc<Redactor>)>;

static CACHE: LazyLock<Mutex<Compiled>> = LazyLock::new(Mutex::default);

/// The home's memory of the last `redact.toml` whose allowlists passed the judgement as a
/// whole (`RuleSet::with_user`): its [`verdict_of`].
pub const VERDICT_FILE: &str = "redact-judged";

/// What [`VERDICT_FILE`] holds for rule file `text`: this version's, and the text's SHA-256.
fn verdict_of(text: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(text.as_bytes());
    let hex = hex::encode(digest);
    format!("{} {hex}", env!("CARGO_PKG_VERSION"))
}

/// The path of `home`'s rule file.
pub fn rules_path(home: &Home) -> PathBuf {
    home.root().join(RULES_FILE)
}

/// `home`'s redactor (see the module docs).
pub fn for_home(home: &Home) -> Result<HomeRedactor> {
    let path = rules_path(home);
    let Some(bytes) = fsutil::read_bounded(&path, RULES_MAX_BYTES, RULES_FILE)? else {
        return Ok(HomeRedactor::Builtin);
    };
    let stamp: Stamp = match std::fs::symlink_metadata(&path) {
        Ok(m) => (m.len(), m.modified().ok()),
        Err(_) => (bytes.len() as u64, None),
    };
    if let Ok(cache) = CACHE.lock()
        && let Some((s, r)) = cache.get(&path)
        && *s == stamp
        && stamp.1.is_some()
    {
        return Ok(HomeRedactor::Custom(r.clone()));
    }
    let text = String::from_utf8(bytes).map_err(|_| StoreError::BadRules {
        path: path.clone(),
        line: 1,
        message: "the file is not UTF-8".into(),
    })?;
    // Judging the allowlists as a whole costs about half a second: a file that passed is
    // remembered by its digest (with this version's rules and probes) in the home's state.
    let verdict = verdict_of(&text);
    let verdict_path = home.state_dir().join(VERDICT_FILE);
    let judged = fsutil::read_bounded(&verdict_path, 256, VERDICT_FILE)
        .ok()
        .flatten()
        .is_some_and(|kept| kept == verdict.as_bytes());
    let rules = RuleSet::with_user_judged(&text, judged).map_err(|e| StoreError::BadRules {
        path: path.clone(),
        line: e.line,
        message: e.message,
    })?;
    if !judged {
        // Only a cost saved: a verdict that cannot be kept is judged again next time.
        let _ = fsutil::create_dir_private(&home.state_dir())
            .and_then(|()| fsutil::write_atomic(&verdict_path, verdict.as_bytes(), false));
    }
    let redactor = Arc::new(Redactor::with_rules(Arc::new(rules)));
    if let Ok(mut cache) = CACHE.lock() {
        cache.insert(path, (stamp, redactor.clone()));
    }
    Ok(HomeRedactor::Custom(redactor))
}
