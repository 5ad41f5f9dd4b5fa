//! A rotation's notice for the machines it rotates out: which machine changed the group's key,
//! when, and to which key id, sealed with the key being rotated out (so the rotated-out
//! machines, and no one outside the group, can read it, and the server cannot forge it). The
//! server keeps it beside the revoked credential and returns it in the `403 revoked` answer.
//!
//! On the wire: `<host hex>:<sealed hex>`, the seal a control record's at index
//! [`NOTICE_INDEX`] of the group's control log (a slot no log ever reaches).

use serde::{Deserialize, Serialize};

use super::seal::{HostId, Kind, SealError, SyncKey};

/// The control-log index a notice is sealed for.
pub const NOTICE_INDEX: u64 = u64::MAX;

/// What a rotation's notice says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// The machine that rotated the key.
    pub host: String,
    /// When, as its clock said (ms).
    pub at: i64,
    /// The new key's id.
    pub key_id: String,
}

/// The notice of `host` rotating `old` (the key being rotated out) to key `new_key_id` at
/// `at`, as the server keeps it.
pub fn seal_notice(
    old: &SyncKey,
    host: &HostId,
    at: i64,
    new_key_id: &str,
) -> Result<String, SealError> {
    let notice = Notice {
        host: host.to_string(),
        at,
        key_id: new_key_id.to_owned(),
    };
    let plain = serde_json::to_vec(&notice).unwrap_or_default();
    let sealed = old.seal(
        Kind::Control,
        host,
        &old.control_log(),
        NOTICE_INDEX,
        &plain,
    )?;
    Ok(format!("{host}:{}", hex::encode(sealed)))
}

/// The notice `text` (as the server returned it), opened with `key`: `None` when it does not
/// open (the change did not come from a machine of the group using freecode's `sync rotate`).
pub fn open_notice(key: &SyncKey, text: &str) -> Option<Notice> {
    let (host, sealed) = text.split_once(':')?;
    let host = HostId::parse(host)?;
    let sealed = hex::decode(sealed).ok()?;
    let opened = key
        .open(&host, &key.control_log(), NOTICE_INDEX, &sealed)
        .ok()?;
    if opened.kind != Kind::Control {
        return None;
    }
    let notice: Notice = serde_json::from_slice(&opened.plaintext).ok()?;
    (notice.host == host.to_string()).then_some(notice)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_opens_with_the_key_it_was_sealed_with_and_nothing_else() {
        let key = SyncKey::from_bytes([3; 32]);
        let host = HostId::parse(&"ab".repeat(16)).unwrap();
        let text = seal_notice(&key, &host, 1_700_000_000_000, "k2").unwrap();
        let n = open_notice(&key, &text).unwrap();
        assert_eq!(
            (n.host.as_str(), n.at, n.key_id.as_str()),
            (&*host.to_string(), 1_700_000_000_000, "k2")
        );
        // Another group's key, another host named, bytes changed: nothing.
        assert_eq!(open_notice(&SyncKey::from_bytes([4; 32]), &text), None);
        let other = HostId::parse(&"cd".repeat(16)).unwrap();
        let moved = text.replacen(&host.to_string(), &other.to_string(), 1);
        assert_eq!(open_notice(&key, &moved), None);
        // The last hex digit changed (to another digit whatever it was: the nonce is random).
        let mut bad = text.clone();
        let last = bad.pop().unwrap();
        bad.push(if last == '0' { '1' } else { '0' });
        assert_eq!(open_notice(&key, &bad), None);
        assert_eq!(open_notice(&key, "zz:00"), None);
        assert_eq!(open_notice(&key, ""), None);
    }
}
