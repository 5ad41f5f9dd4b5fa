//! Setting a home up to sync and changing its key: `init`, `join` (a new machine, or the new
//! key of a group rotated elsewhere), `rotate` (a new key for the group: every record's key
//! wrap renewed on the server and in the copies kept here, the credential registered).

use freecode_remote::home_sync::{HostId, Remote, SealError, SyncKey};
use freecode_store::{Home, fsutil};

use super::engine::Engine;
use super::kept::Kept;
use super::state::{self};
use super::{SyncRotation, SyncSetup, remote_for, seal_err, take_turn};
use crate::error::{Error, Result};

/// `freecode sync init`: makes the sync key and this machine's host id, checks the server.
pub fn init(home: &Home, server: &str, force: bool) -> Result<SyncSetup> {
    let key = SyncKey::generate().map_err(seal_err)?;
    setup(home, server, key, force)
}

/// `freecode sync join`: takes the key (a phrase, or a file's hex or phrase) of the machines
/// already syncing.
pub fn join(home: &Home, server: &str, key_text: &str, force: bool) -> Result<SyncSetup> {
    let key = SyncKey::parse(key_text).map_err(|e| Error::Invalid(e.to_string()))?;
    setup(home, server, key, force)
}

pub(super) fn setup(home: &Home, server: &str, key: SyncKey, force: bool) -> Result<SyncSetup> {
    let remote = remote_for(home, server, &key)?;
    remote.status()?;
    // A rotated key's phrase is completed by the ring the server keeps for it.
    let key = match remote.get_ring(&key.id())? {
        Some(ring) => key.with_ring(&ring).map_err(seal_err)?,
        None => key,
    };
    // The new key of the group this machine syncs in (rotated elsewhere): the key changes,
    // this machine's host id and progress stay.
    if let Ok(current) = state::load(home)
        && current.settings.server == remote.base()
        && key.key_ids().contains(&current.key.id())
    {
        let _turn = take_turn(home)?;
        let settings = state::Settings {
            key_id: key.id(),
            ..current.settings
        };
        state::save_key(home, &settings, &key)?;
        let mut kept = Kept::open(home)?;
        rewrap_kept(&key, &mut kept)?;
        kept.commit()?;
        return Ok(SyncSetup {
            server: settings.server,
            host: settings.host.to_string(),
            key_id: settings.key_id,
        });
    }
    home.ensure()?;
    let settings = state::Settings {
        server: remote.base().to_owned(),
        host: HostId::generate().map_err(seal_err)?,
        key_id: key.id(),
    };
    // Set up again for another group (a new one started from this machine's copy after a
    // rogue rotation): the old group's progress and kept copies go, the sessions stay.
    let _turn = if force && super::is_set_up(home) {
        let turn = take_turn(home)?;
        Kept::remove(home)?;
        Some(turn)
    } else {
        None
    };
    state::save_setup(home, &settings, &key, force)?;
    Ok(SyncSetup {
        server: settings.server,
        host: settings.host.to_string(),
        key_id: settings.key_id,
    })
}

/// The copies kept here moved under `key`; how many were.
pub(super) fn rewrap_kept(key: &SyncKey, kept: &mut Kept) -> Result<u64> {
    let mut n = 0;
    for k in kept.logs()? {
        for (host, index, sealed) in kept.of_log(&k.log)? {
            if host != k.host {
                continue;
            }
            match key.rewrap(&host, &k.log, index, &sealed) {
                Ok(Some(new)) => {
                    kept.replace(&k.log, &host, index, &new)?;
                    n += 1;
                }
                // Slots passed over (garbage kept as the server held it) stay as they are.
                Ok(None) | Err(SealError::OtherKey { .. } | SealError::Tampered { .. }) => {}
                Err(e) => return Err(seal_err(e)),
            }
        }
    }
    Ok(n)
}

/// `freecode sync rotate`: a new sync key for the group. Every record on the server gets a
/// new key wrap (the wrap alone is sent, never the content), the new key's ring goes to the
/// server, and the other machines join again with the new phrase (`sync key`), keeping their
/// progress. A rotation cut short is finished by the next `sync rotate` (no second new key).
pub fn rotate(home: &Home) -> Result<SyncRotation> {
    let _turn = take_turn(home)?;
    let mut e = Engine::open(home)?;
    // The marker names the key being rotated to: written after that key is saved, so it
    // never outlives a key that was not (a kill before it makes the next rotation a new one).
    let marker = state::dir(home).join("rotating");
    let resuming = fsutil::read_bounded(&marker, 64, "rotation marker")?
        .is_some_and(|id| id == e.key.id().as_bytes());
    // The notice for the machines rotated out, sealed with the key they have: which machine
    // rotated, when, to which key (a rotation resumed has the old key no more: none).
    let mut notice = None;
    if !resuming {
        let new = e.key.rotate().map_err(seal_err)?;
        notice = Some(
            freecode_remote::home_sync::notice::seal_notice(
                &e.key,
                &e.host,
                freecode_store::now_ms(),
                &new.id(),
            )
            .map_err(seal_err)?,
        );
        let ring = new.seal_ring().map_err(seal_err)?;
        e.remote.put_ring(&new.id(), &ring)?;
        let settings = state::Settings {
            key_id: new.id(),
            ..e.settings.clone()
        };
        state::save_key(home, &settings, &new)?;
        fsutil::write_atomic(&marker, new.id().as_bytes(), true)?;
        e.settings = settings;
        e.key = new;
    }
    // The new key's credential made the group's, the old one revoked: from here a machine on
    // the old key can neither read nor write.
    e.remote = register_credential(home, &e.settings.server, &e.key, notice.as_deref())?;
    let mut out = SyncRotation {
        server: e.settings.server.clone(),
        key_id: e.key.id(),
        rewrapped: 0,
        bytes_sent: 0,
        kept_rewrapped: 0,
        skipped: 0,
    };
    for lc in e.remote.status()? {
        let mut from = 0;
        while from < lc.count {
            let (got, next) = e.remote.get_records(&lc.log, &lc.host, from)?;
            if got.is_empty() {
                break;
            }
            for (i, sealed) in got.iter().enumerate() {
                let index = from + i as u64;
                let wrap = match e.key.rewrap(&lc.host, &lc.log, index, sealed) {
                    Ok(Some(new)) => new[freecode_remote::home_sync::seal::WRAP_SPAN].to_vec(),
                    Ok(None) => continue,
                    Err(SealError::OtherKey { .. } | SealError::Tampered { .. }) => {
                        // A broken wrap mended from the copy kept here; garbage left.
                        let kept = e.kept.get(&lc.log, &lc.host, index)?;
                        match e.wrap_from_kept(&lc.log, &lc.host, index, sealed, kept)? {
                            Some(wrap) => wrap,
                            None => {
                                out.skipped += 1;
                                continue;
                            }
                        }
                    }
                    Err(e) => return Err(seal_err(e)),
                };
                if e.remote.rewrap_record(&lc.log, &lc.host, index, &wrap)? {
                    out.rewrapped += 1;
                    out.bytes_sent += wrap.len() as u64;
                }
            }
            from = next;
        }
    }
    out.kept_rewrapped = rewrap_kept(&e.key, &mut e.kept)?;
    e.kept.commit()?;
    fsutil::remove_file(&marker)?;
    Ok(out)
}

/// Makes `key`'s credential its group's current one on `server`, authorised by the credential
/// of a key it replaced (the newest the server still takes: a rotation cut short before its
/// marker was written left one in between that the server never knew); a client of the server
/// for `key`. Done already (a rotation resumed) is no error.
pub(super) fn register_credential(
    home: &Home,
    server: &str,
    key: &SyncKey,
    notice: Option<&str>,
) -> Result<Remote> {
    let remote = remote_for(home, server, key)?;
    let hash = key.credential_hash();
    for old in key.older_credentials() {
        match remote
            .clone()
            .with_credential(old)
            .rotate_credential(&hash, notice)
        {
            Ok(_) => return Ok(remote),
            Err(
                freecode_remote::share::ClientError::Status {
                    status: 401 | 403 | 404,
                    ..
                }
                | freecode_remote::share::ClientError::RotatedOut { .. },
            ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Every older credential refused: registered already, if the new one is taken.
    match remote.rotate_credential(&hash, notice) {
        Ok(_) => Ok(remote),
        Err(e) => Err(Error::Failed(format!(
            "the server took none of this group's credentials to register the new key \
             ({e}): nothing was revoked; run `freecode sync rotate` again"
        ))),
    }
}
