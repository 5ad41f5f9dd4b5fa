//! Session ids, validated before they touch a path.
//!
//! The original joins ids into paths unchecked (SPEC §19.1–2: `..` deleted the home directory).
//! A [`SessionId`] can only be built from a string that is safe as one path component: ASCII
//! letters, digits, `.`, `_` and `-`, 1 to 128 characters, not `.`/`..` and not starting with a
//! dot. That admits every id the original produces (v4 UUIDs, `subagent-<ms>-<base36>`, test ids
//! such as `msg-1`).

use std::fmt;

/// The longest id accepted.
pub const MAX_ID_LEN: usize = 128;

/// Why a string is not a valid session id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The id was empty.
    #[error("session id is empty")]
    Empty,
    /// The id was longer than [`MAX_ID_LEN`].
    #[error("session id is {len} characters long; at most {MAX_ID_LEN} are allowed")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The id is `.`/`..` or starts with a dot.
    #[error("session id {id:?} starts with a dot")]
    Dot {
        /// The rejected id.
        id: String,
    },
    /// The id has a character outside the allowed set.
    #[error(
        "session id {id:?} contains {ch:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"
    )]
    BadChar {
        /// The rejected id (escaped when printed).
        id: String,
        /// The first offending character.
        ch: char,
    },
}

/// A validated session id: safe to use as a single path component.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct SessionId(String);

impl SessionId {
    /// Validates `s` as a session id.
    pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
        let s = s.into();
        validate(&s)?;
        Ok(Self(s))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn validate(s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty);
    }
    if s.len() > MAX_ID_LEN {
        return Err(IdError::TooLong { len: s.len() });
    }
    if s.starts_with('.') {
        return Err(IdError::Dot { id: s.to_owned() });
    }
    if let Some(ch) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(IdError::BadChar {
            id: s.to_owned(),
            ch,
        });
    }
    Ok(())
}

impl std::str::FromStr for SessionId {
    type Err = IdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for SessionId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for SessionId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::new(s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_the_original_writes() {
        for ok in [
            "68d44408-94df-4f2f-ae2e-ffffdb68e297",
            "subagent-1768467600000-a1b2c",
            "msg-1",
            "A.b_c-9",
        ] {
            assert!(SessionId::new(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn rejects_traversal_and_junk() {
        let long = "a".repeat(300);
        for bad in [
            "", ".", "..", "../../x", "a/b", "a\\b", "a\0b", ".hidden", "é", "a b", &long,
        ] {
            assert!(SessionId::new(bad).is_err(), "{bad:?}");
        }
    }
}
