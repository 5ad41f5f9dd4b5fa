//! Sync groups: whose objects a home-sync request may touch.
//!
//! Every machine of a sync group derives one credential from the group's sync key (32 bytes,
//! [`crate::home_sync::SyncKey::credential`]) and sends it on every `/sync/v1/` request in the
//! [`CREDENTIAL_HEADER`] (as 64 hex characters, over TLS or loopback only, like the API key).
//! The server never learns the sync key, and never stores the credential: it keeps only its
//! SHA-256, in two kinds of object of its store:
//!
//! ```text
//! creds/<sha256 of a credential>   {"group": "<group id>"}          made once, never changed
//! groups/<group id>/group          {"current": "<sha256>", "revoked": [...], "created": ms}
//! groups/<group id>/{logs,claims,rings}/…   the group's objects (see the `home_sync` module)
//! ```
//!
//! - A request names no group: the credential's hash finds it, so no request can name, read,
//!   write, list or count another group's objects, whatever its path says.
//! - The first write with a credential the server has never seen makes a group (a random id)
//!   whose current credential it is; a read with one answers as for an empty group and makes
//!   nothing. With `--api-key`, every request needs that key first: it decides who may make
//!   groups at all.
//! - A credential is valid only while it is its group's current one. `PUT /sync/v1/credential`
//!   (authorised by the current credential) makes another current and revokes the one that
//!   authorised it, at once for reads and writes: what `sync rotate` does. A revoked
//!   credential is answered `403 {"code": "revoked"}`, so a machine still on a rotated-out key
//!   is told to join again.
//! - `creds/<hash>` is immutable, so a replica keeps the hash → group map in memory; the group
//!   object is read on every request, so a revocation through one replica holds on every
//!   replica from the next request.
//!
//! Every rotation is remembered with the credential it revoked (`rotations`: the server's
//! time, and the rotating machine's notice, sealed with the key being rotated out so that only
//! the group's members can read it and the server cannot forge it: which machine, and the new
//! key's id). A machine on the revoked key gets them in its `403 revoked` answer (`rotatedAt`,
//! `notice`), so it can say which machine changed the key and when, or that the change came
//! with no notice (not freecode's `sync rotate`: a member gone rogue), and what to do.
//!
//! Two rotations at once through two replicas both succeed, and the later write of the group
//! object wins: the other rotation's new credential is then not current (refused with
//! `403 {"code": "not-current"}`), and that machine joins again with the winner's phrase.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::unauthorized;
use crate::blob::{BlobError, SyncKey, random_hex};
use crate::server::record::{is_hex, now_ms, secrets_equal, sha256};
use crate::server::{App, error};

pub use crate::home_sync::remote::CREDENTIAL_HEADER;

const CREDS: &str = "creds";
const GROUPS: &str = "groups";
const GROUP_OBJECT: &str = "group";
/// A group's records (`groups/<id>/logs/…`).
pub(crate) const LOGS: &str = "logs";
/// A group's claims (`groups/<id>/claims/…`).
pub(crate) const CLAIMS: &str = "claims";
/// A group's key rings (`groups/<id>/rings/…`).
pub(crate) const RINGS: &str = "rings";
/// The folders of a group's own objects (what its limits count).
pub(crate) const GROUP_OBJECTS: [&str; 3] = [LOGS, CLAIMS, RINGS];
/// Revoked credentials a group remembers (to say "rotated out" rather than "unknown").
const MAX_REVOKED: usize = 256;
/// Hash → group entries a replica keeps in memory before it starts over.
const MAX_CACHED: usize = 65_536;

/// The caller's group, as its credential proved it.
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The group's id (32 hex characters; the server's own, never the client's).
    pub id: String,
    /// The SHA-256 of the credential that proved it (64 hex characters).
    pub credential: String,
}

impl Group {
    /// The key of the group's object `rest` (segments checked as [`SyncKey::new`] does).
    pub fn key<'a>(&'a self, rest: impl IntoIterator<Item = &'a str>) -> Option<SyncKey> {
        SyncKey::new([GROUPS, self.id.as_str()].into_iter().chain(rest))
    }
}

/// A group's own object.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct GroupObject {
    current: String,
    #[serde(default)]
    revoked: Vec<String>,
    #[serde(default)]
    created: u64,
    /// The rotations, newest last (as many as the revoked credentials remembered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    rotations: Vec<Rotation>,
}

/// One rotation: the credential it revoked, when, and the rotating machine's notice.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Rotation {
    from: String,
    at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    notice: Option<String>,
}

/// The longest rotation notice kept (`<host hex>:<sealed hex>`).
const MAX_NOTICE: usize = 4096;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct CredObject {
    group: String,
}

/// Replica-local memory of `creds/` (immutable objects).
#[derive(Debug, Default)]
pub(crate) struct CredCache(Mutex<HashMap<String, String>>);

impl CredCache {
    fn get(&self, hash: &str) -> Option<String> {
        self.0.lock().ok()?.get(hash).cloned()
    }

    fn put(&self, hash: &str, group: &str) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= MAX_CACHED {
                m.clear();
            }
            m.insert(hash.to_owned(), group.to_owned());
        }
    }
}

/// What a request needs of its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// To read: a credential the server has never seen answers as an empty group (`None`).
    Read,
    /// To write: a credential the server has never seen makes a group.
    Write,
}

fn refused(status: StatusCode, code: &'static str, message: &str) -> Box<Response> {
    let mut r = (status, Json(json!({ "error": message, "code": code }))).into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::UNAUTHORIZED {
        h.insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("FreecodeSync"),
        );
    }
    Box::new(r)
}

fn store_failed(op: &'static str, err: &BlobError) -> Box<Response> {
    Box::new(crate::server::store_failed(op, err))
}

fn bad_key() -> Box<Response> {
    Box::new(error(StatusCode::INTERNAL_SERVER_ERROR, "bad group key"))
}

fn try_again() -> Box<Response> {
    Box::new(error(
        StatusCode::SERVICE_UNAVAILABLE,
        "changed meanwhile; try again",
    ))
}

/// The SHA-256 (hex) of the credential a request carries, or why it carries none usable.
fn presented(headers: &HeaderMap) -> Result<String, Box<Response>> {
    let Some(value) = headers.get(CREDENTIAL_HEADER) else {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "no-credential",
            "this request carries no sync group credential: this server needs every machine \
             on a freecode that sends one (update it, then `freecode sync now`)",
        ));
    };
    let text = value.to_str().unwrap_or_default().trim();
    let bytes = text.as_bytes();
    if bytes.len() != 64 || !bytes.iter().all(u8::is_ascii_hexdigit) {
        return Err(refused(
            StatusCode::UNAUTHORIZED,
            "bad-credential",
            "the sync group credential is not 64 hex characters",
        ));
    }
    Ok(hex::encode(sha256(text.to_ascii_lowercase().as_bytes())))
}

fn cred_key(hash: &str) -> Option<SyncKey> {
    SyncKey::new([CREDS, hash])
}

fn group_key(id: &str) -> Option<SyncKey> {
    SyncKey::new([GROUPS, id, GROUP_OBJECT])
}

/// The group `creds/<hash>` names, if there is one (from this replica's memory if `cached`).
async fn group_of_hash(
    app: &App,
    hash: &str,
    cached: bool,
) -> Result<Option<String>, Box<Response>> {
    if cached && let Some(g) = app.sync_creds.get(hash) {
        return Ok(Some(g));
    }
    let key = cred_key(hash).ok_or_else(bad_key)?;
    let Some(data) = app
        .store
        .sync_get(&key)
        .await
        .map_err(|e| store_failed("get", &e))?
    else {
        return Ok(None);
    };
    let cred: CredObject = serde_json::from_slice(&data).map_err(|_| bad_key())?;
    app.sync_creds.put(hash, &cred.group);
    Ok(Some(cred.group))
}

/// Makes `creds/<hash>` name group `group` unless it names one already: the group it names.
async fn claim_hash(app: &App, hash: &str, group: &str) -> Result<String, Box<Response>> {
    let key = cred_key(hash).ok_or_else(bad_key)?;
    let body = serde_json::to_vec(&CredObject {
        group: group.to_owned(),
    })
    .map_err(|_| bad_key())?;
    match app.store.sync_create(&key, Bytes::from(body)).await {
        Ok(()) => {
            app.sync_creds.put(hash, group);
            Ok(group.to_owned())
        }
        Err(BlobError::AlreadyExists { .. }) => {
            group_of_hash(app, hash, false).await?.ok_or_else(try_again)
        }
        Err(e) => Err(store_failed("put", &e)),
    }
}

async fn read_group(app: &App, id: &str) -> Result<Option<GroupObject>, Box<Response>> {
    let key = group_key(id).ok_or_else(bad_key)?;
    match app.store.sync_get(&key).await {
        Ok(Some(d)) => serde_json::from_slice(&d).map(Some).map_err(|_| bad_key()),
        Ok(None) => Ok(None),
        Err(e) => Err(store_failed("get", &e)),
    }
}

/// The caller's group: the API key (when the server has one) and then the credential, checked
/// before anything else of the request is looked at. `Ok(None)`: a read by a credential the
/// server has never seen.
pub(crate) async fn authorize(
    app: &App,
    headers: &HeaderMap,
    need: Need,
) -> Result<Option<Group>, Box<Response>> {
    if let Some(r) = unauthorized(app, headers) {
        return Err(Box::new(r));
    }
    let hash = presented(headers)?;
    let id = match group_of_hash(app, &hash, true).await? {
        Some(id) => id,
        None if need == Need::Read => {
            app.strangers.unknown(headers)?;
            return Ok(None);
        }
        None => {
            // A new group: with an API key its holder decides; without one, strangers are
            // bounded per address and in number.
            if app.api_key.is_none() {
                app.strangers.new_group(headers)?;
            }
            let fresh = random_hex::<16>()
                .map_err(|_| Box::new(error(StatusCode::INTERNAL_SERVER_ERROR, "no randomness")))?;
            claim_hash(app, &hash, &fresh).await?
        }
    };
    let (id, object) = match read_group(app, &id).await? {
        Some(o) => (id, o),
        None => {
            // `creds/<hash>` is made before its group's object, by the group's first write:
            // the object is missing only where that write was cut short (or the store lost
            // both, behind this replica's memory), so both are made now, with this credential
            // current (create-only: a racing first write agrees).
            let id = claim_hash(app, &hash, &id).await?;
            let object = GroupObject {
                current: hash.clone(),
                revoked: Vec::new(),
                created: now_ms(),
                rotations: Vec::new(),
            };
            let key = group_key(&id).ok_or_else(bad_key)?;
            let body = serde_json::to_vec(&object).map_err(|_| bad_key())?;
            let object = match app.store.sync_create(&key, Bytes::from(body)).await {
                Ok(()) => object,
                Err(BlobError::AlreadyExists { .. }) => {
                    read_group(app, &id).await?.ok_or_else(try_again)?
                }
                Err(e) => return Err(store_failed("put", &e)),
            };
            (id, object)
        }
    };
    if secrets_equal(&object.current, &hash) {
        let group = Group {
            id,
            credential: hash,
        };
        app.quotas.admit(&group)?;
        return Ok(Some(group));
    }
    app.strangers.unknown(headers)?;
    if object.revoked.iter().any(|r| secrets_equal(r, &hash)) {
        let rotation = object
            .rotations
            .iter()
            .rev()
            .find(|r| secrets_equal(&r.from, &hash));
        let mut r = (
            StatusCode::FORBIDDEN,
            Json(json!({
                "error": "this machine's sync key was rotated out of its group: get the new \
                          phrase from a machine that has it (`freecode sync key`) and run \
                          `freecode sync join` with it",
                "code": "revoked",
                "rotatedAt": rotation.map(|r| r.at),
                "notice": rotation.and_then(|r| r.notice.clone()),
            })),
        )
            .into_response();
        r.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        return Err(Box::new(r));
    }
    Err(refused(
        StatusCode::FORBIDDEN,
        "not-current",
        "this sync key is not its group's current key (a rotation elsewhere replaced it): get \
         the current phrase from another machine and run `freecode sync join` with it",
    ))
}

/// The caller's group for a write ([`authorize`] with [`Need::Write`]: a group is made for a
/// credential the server has never seen, so there always is one).
pub(crate) async fn writer(app: &App, headers: &HeaderMap) -> Result<Group, Box<Response>> {
    authorize(app, headers, Need::Write)
        .await?
        .ok_or_else(|| Box::new(error(StatusCode::INTERNAL_SERVER_ERROR, "no group made")))
}

/// The body of `PUT /sync/v1/credential`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewCredential {
    /// The SHA-256 of the new credential, 64 lowercase hex characters.
    credential: String,
    /// The rotating machine's notice for the machines it rotates out (`<host hex>:<sealed
    /// hex>`, sealed with the key being rotated out), kept as it is.
    #[serde(default)]
    notice: Option<String>,
}

/// `PUT /sync/v1/credential`: the caller's group gets a new current credential (its hash in
/// the body, `{"credential": "<64 hex>"}`), and the one that authorised the request is
/// revoked. `200 {"rotated": bool}` (`false`: it was current already).
pub(crate) async fn rotate(
    axum::extract::State(app): axum::extract::State<std::sync::Arc<App>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let group = match authorize(&app, &headers, Need::Read).await {
        Ok(Some(g)) => g,
        Ok(None) => {
            return *refused(
                StatusCode::NOT_FOUND,
                "no-group",
                "no group has this credential: nothing was synced with this key yet",
            );
        }
        Err(r) => return *r,
    };
    let Ok(new) = serde_json::from_slice::<NewCredential>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected {\"credential\": \"<64 lowercase hex>\"}",
        );
    };
    let notice = new.notice;
    if notice.as_ref().is_some_and(|n| {
        n.len() > MAX_NOTICE || !n.bytes().all(|b| b == b':' || b.is_ascii_hexdigit())
    }) {
        return error(
            StatusCode::BAD_REQUEST,
            "the rotation notice is not `<hex>:<hex>` of at most 4,096 characters",
        );
    }
    let new = new.credential;
    if !is_hex(&new, 64) {
        return error(
            StatusCode::BAD_REQUEST,
            "the new credential's hash is not 64 lowercase hex characters",
        );
    }
    if new == group.credential {
        return (StatusCode::OK, Json(json!({ "rotated": false }))).into_response();
    }
    match claim_hash(&app, &new, &group.id).await {
        Ok(g) if g == group.id => {}
        Ok(_) => {
            return *refused(
                StatusCode::CONFLICT,
                "taken",
                "that credential belongs to another group",
            );
        }
        Err(r) => return *r,
    }
    let mut object = match read_group(&app, &group.id).await {
        Ok(Some(o)) => o,
        Ok(None) => return *try_again(),
        Err(r) => return *r,
    };
    object
        .revoked
        .retain(|r| r != &new && r != &group.credential);
    object.revoked.push(group.credential.clone());
    if object.revoked.len() > MAX_REVOKED {
        let cut = object.revoked.len() - MAX_REVOKED;
        object.revoked.drain(..cut);
    }
    object.current = new;
    object.rotations.retain(|r| r.from != group.credential);
    object.rotations.push(Rotation {
        from: group.credential.clone(),
        at: now_ms(),
        notice,
    });
    if object.rotations.len() > MAX_REVOKED {
        let cut = object.rotations.len() - MAX_REVOKED;
        object.rotations.drain(..cut);
    }
    let Some(key) = group_key(&group.id) else {
        return *bad_key();
    };
    let Ok(body) = serde_json::to_vec(&object) else {
        return *bad_key();
    };
    match app.store.sync_replace(&key, Bytes::from(body)).await {
        Ok(()) => {
            tracing::info!(group = &group.id[..8], "sync group credential rotated");
            (StatusCode::OK, Json(json!({ "rotated": true }))).into_response()
        }
        Err(e) => *store_failed("put", &e),
    }
}
