//! The home-sync endpoints, `/sync/v1/`: sealed records in per-(log, host) logs with dense
//! indexes, and claims. The server cannot read either; it keeps their order and refuses what
//! would break it.
//!
//! - `GET /sync/v1/status`: `{"logs": [{"log", "host", "count"}]}` of the caller's group,
//!   counted from a listing of the store (a log's count is its run of indexes from 0), so replicas agree without state.
//!   A replica answers from its last listing for up to [`STATUS_TTL`], forgotten as soon as a
//!   record is stored or a log purged through it; a count may so lag another replica's writes
//!   by that long, and clients take it as a hint (the records themselves are the truth).
//! - `PUT /sync/v1/logs/{log}/{host}/{index}`: body a sealed record. `201`; `409 {"code":
//!   "exists"}` when the index is taken (a create-only put: of two replicas racing for one
//!   index, one wins); `409 {"code": "gap"}` when `index - 1` is missing.
//! - `GET /sync/v1/logs/{log}/{host}?from=N`: the records from `N` on, framed (`u32`
//!   big-endian length, bytes), as many as fit in the body limit (at least one), with
//!   `x-freecode-next` the index after the last one sent.
//! - `PUT /sync/v1/claims/{log}/{chain}`: create-only; `201`, or `409` with the claim that was
//!   there first as the body.
//! - `DELETE /sync/v1/logs/{log}`: removes every host's records of the log and its claims
//!   (a purge). `204`.
//! - `POST /sync/v1/logs/{log}/{host}/{index}/wrap`: a record's new key wrap after a key
//!   rotation (the bytes [`WRAP_SPAN`](crate::home_sync::seal::WRAP_SPAN) of the record, nothing
//!   else: the content is never sent again, and a rewrap cannot change it): `200`; `404`
//!   without a record there; `400` for a body of another length.
//! - `POST /sync/v1/batch`: many claims and records in one request (see [`batch`]).
//! - `PUT /sync/v1/rings/{key id}`: a rotated key's sealed key ring, create-only (`201`,
//!   `409 {"code": "exists"}`); `GET` it (`200`, or `404`).
//!
//! - `PUT /sync/v1/credential`: the group's next credential (see [`super::rules::group`]).
//!
//! Each group's requests, bytes and objects are limited ([`super::rules::quota`]): `429` with
//! `Retry-After`, or `413` before anything of the write is stored, each naming the limit.
//!
//! Every endpoint needs the API key when the server has one, and then the caller's group
//! credential ([`super::rules::group::CREDENTIAL_HEADER`]): every path above is inside the caller's
//! group, which the credential alone names, so no request reaches another group's objects. Ids
//! are 32 (chains 64) lowercase hex characters and indexes decimal, so no request names
//! anything else in the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest as _, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::record::is_hex;
use super::rules::group::{CLAIMS, Group, LOGS, Need, RINGS, authorize, writer};
use super::{App, error, store_failed, too_large};
use crate::blob::BlobError;

/// How long a replica answers `status` from its last listing.
pub const STATUS_TTL: std::time::Duration = std::time::Duration::from_secs(1);

fn forget_status(app: &App, group: &Group) {
    app.sync_writes
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if let Ok(mut s) = app.sync_status.lock() {
        s.remove(&group.id);
    }
}

/// Groups whose last status a replica keeps before it starts over.
const MAX_STATUS_CACHED: usize = 4096;

fn status_response(json: Bytes) -> Response {
    let mut r = Response::new(Body::from(json));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn index_segment(index: u64) -> String {
    format!("{index:020}")
}

/// The index of a record's path, if its log and host ids and its index are well formed.
fn record_index(log: &str, host: &str, index: &str) -> Option<u64> {
    (is_hex(log, 32) && is_hex(host, 32))
        .then(|| index.parse::<u64>().ok())
        .flatten()
}

fn bad_id() -> Response {
    error(StatusCode::BAD_REQUEST, "malformed log, host or chain id")
}

fn conflict(code: &'static str, message: String) -> Response {
    let mut r = (
        StatusCode::CONFLICT,
        Json(json!({ "error": message, "code": code })),
    )
        .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn body(app: &App, request: Request) -> Result<Bytes, Response> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > app.max_body as u64) {
        return Err(too_large(app.max_body));
    }
    match Bytes::from_request(request, &()).await {
        Ok(b) if b.is_empty() => Err(error(StatusCode::BAD_REQUEST, "empty body")),
        Ok(b) => Ok(b),
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            Err(too_large(app.max_body))
        }
        Err(rejection) => Err(error(rejection.status(), rejection.body_text())),
    }
}

/// `GET /sync/v1/status`: the caller's group's logs alone.
pub(crate) async fn status(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let group = match authorize(&app, &headers, Need::Read).await {
        Ok(Some(g)) => g,
        Ok(None) => return status_response(Bytes::from_static(b"{\"logs\":[]}")),
        Err(r) => return *r,
    };
    let cached = app
        .sync_status
        .lock()
        .ok()
        .and_then(|s| s.get(&group.id).cloned())
        .filter(|(at, _)| at.elapsed() < STATUS_TTL);
    if let Some((_, json)) = cached {
        return status_response(json);
    }
    let listed_at = std::time::Instant::now();
    let writes = app.sync_writes.load(std::sync::atomic::Ordering::SeqCst);
    let Some(under) = group.key([LOGS]) else {
        return bad_id();
    };
    let keys = match app.store.sync_list(&under).await {
        Ok(k) => k,
        Err(e) => return store_failed("list", &e),
    };
    let mut indexes: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for key in keys {
        if let [_, _, _, log, host, index] = key.segments()
            && is_hex(log, 32)
            && is_hex(host, 32)
            && let Ok(i) = index.parse::<u64>()
        {
            indexes
                .entry((log.clone(), host.clone()))
                .or_default()
                .push(i);
        }
    }
    let logs: Vec<_> = indexes
        .into_iter()
        .map(|((log, host), mut v)| {
            v.sort_unstable();
            let count = v
                .iter()
                .enumerate()
                .take_while(|(n, i)| *n as u64 == **i)
                .count();
            json!({ "log": log, "host": host, "count": count })
        })
        .collect();
    let json = Bytes::from(json!({ "logs": logs }).to_string());
    if let Ok(mut s) = app.sync_status.lock()
        && app.sync_writes.load(std::sync::atomic::Ordering::SeqCst) == writes
    {
        if s.len() >= MAX_STATUS_CACHED {
            s.clear();
        }
        s.insert(group.id.clone(), (listed_at, json.clone()));
    }
    status_response(json)
}

/// `PUT /sync/v1/logs/{log}/{host}/{index}`.
pub(crate) async fn put_record(
    State(app): State<Arc<App>>,
    Path((log, host, index)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    let group = match writer(&app, request.headers()).await {
        Ok(g) => g,
        Err(r) => return *r,
    };
    let Some(index) = record_index(&log, &host, &index) else {
        return bad_id();
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let size = data.len() as u64;
    let held = match app.quotas.reserve(&app, &group, size, 1).await {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let stored = store_record(&app, &group, &log, &host, index, data).await;
    if !matches!(stored, Ok(Stored::Created)) {
        app.quotas.release(&held, size, 1);
    }
    match stored {
        Ok(Stored::Created) => {
            (StatusCode::CREATED, Json(json!({ "index": index }))).into_response()
        }
        Ok(Stored::Exists(_)) => conflict("exists", format!("record {index} of this log exists")),
        Ok(Stored::Gap) => conflict(
            "gap",
            format!("record {} of this log is missing", index - 1),
        ),
        Err(r) => *r,
    }
}

/// Logs a batch stores at once.
const BATCH_PARALLEL: usize = 16;

/// An item of a batch, parsed.
enum Item {
    Record {
        log: String,
        host: String,
        index: u64,
        data: Bytes,
    },
    Claim {
        log: String,
        chain: String,
        data: Bytes,
    },
}

impl Item {
    fn log(&self) -> &str {
        match self {
            Self::Record { log, .. } | Self::Claim { log, .. } => log,
        }
    }
}

/// What storing a record or a claim did.
enum Stored {
    Created,
    /// Taken: for a claim, the one there.
    Exists(Bytes),
    /// The record before it is missing.
    Gap,
}

/// Stores record `index` of `host`'s log `log` (ids checked by the caller), create-only.
async fn store_record(
    app: &App,
    group: &Group,
    log: &str,
    host: &str,
    index: u64,
    data: Bytes,
) -> Result<Stored, Box<Response>> {
    let record = |i: u64| {
        let i = index_segment(i);
        group
            .key([LOGS, log, host, i.as_str()])
            .ok_or_else(|| Box::new(bad_id()))
    };
    let key = record(index)?;
    if index > 0 {
        match app.store.sync_exists(&record(index - 1)?).await {
            Ok(true) => {}
            Ok(false) => return Ok(Stored::Gap),
            Err(e) => return Err(Box::new(store_failed("head", &e))),
        }
    }
    match app.store.sync_create(&key, data).await {
        Ok(()) => {
            forget_status(app, group);
            Ok(Stored::Created)
        }
        Err(BlobError::AlreadyExists { .. }) => Ok(Stored::Exists(Bytes::new())),
        Err(e) => Err(Box::new(store_failed("put", &e))),
    }
}

/// Stores the claim on `log` at `chain` (ids checked by the caller), create-only.
async fn store_claim(
    app: &App,
    group: &Group,
    log: &str,
    chain: &str,
    data: Bytes,
) -> Result<Stored, Box<Response>> {
    let key = group
        .key([CLAIMS, log, chain])
        .ok_or_else(|| Box::new(bad_id()))?;
    match app.store.sync_create(&key, data).await {
        Ok(()) => Ok(Stored::Created),
        Err(BlobError::AlreadyExists { .. }) => match app.store.sync_get(&key).await {
            Ok(Some(existing)) => Ok(Stored::Exists(existing)),
            // Purged between the two requests: the client tries again.
            Ok(None) => Err(Box::new(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "claim changed; try again",
            ))),
            Err(e) => Err(Box::new(store_failed("get", &e))),
        },
        Err(e) => Err(Box::new(store_failed("put", &e))),
    }
}

/// `POST /sync/v1/batch`: claims and records in one request, stored as the single endpoints
/// would (create-only, gaps refused): one log's items in their order, different logs at once. The body is frames (see `home::remote::frame`) of items: `1` · log (16
/// bytes) · host (16) · index (u64 big-endian) · a sealed record, or `2` · log (16) · chain
/// (32) · a sealed claim. The answer is one frame per item: `1` created, `2` taken (a claim's
/// the claim there after it), `3` the record before it missing.
pub(crate) async fn batch(State(app): State<Arc<App>>, request: Request) -> Response {
    let group = match writer(&app, request.headers()).await {
        Ok(g) => g,
        Err(r) => return *r,
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Some(items) = crate::home_sync::remote::unframe(&data) else {
        return error(StatusCode::BAD_REQUEST, "the batch is not whole frames");
    };
    // Parsed first: a malformed item refuses the whole batch before anything is stored.
    let mut parsed = Vec::with_capacity(items.len());
    for item in items {
        parsed.push(match item.split_first() {
            Some((1, rest)) if rest.len() > 40 => {
                let index = u64::from_be_bytes(rest[32..40].try_into().unwrap_or_default());
                Item::Record {
                    log: hex::encode(&rest[..16]),
                    host: hex::encode(&rest[16..32]),
                    index,
                    data: Bytes::copy_from_slice(&rest[40..]),
                }
            }
            Some((2, rest)) if rest.len() > 48 => Item::Claim {
                log: hex::encode(&rest[..16]),
                chain: hex::encode(&rest[16..48]),
                data: Bytes::copy_from_slice(&rest[48..]),
            },
            _ => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "a batch item is neither a record nor a claim",
                );
            }
        });
    }
    // Room for all of it first: a batch past a limit is refused whole, nothing stored.
    let sizes: Vec<u64> = parsed
        .iter()
        .map(|i| match i {
            Item::Record { data, .. } | Item::Claim { data, .. } => data.len() as u64,
        })
        .collect();
    let held = match app
        .quotas
        .reserve(&app, &group, sizes.iter().sum(), sizes.len() as u64)
        .await
    {
        Ok(h) => h,
        Err(r) => return *r,
    };
    // One log's items in order, different logs at once (their writes wait on the disk, not
    // on each other).
    let mut by_log: BTreeMap<String, Vec<(usize, Item)>> = BTreeMap::new();
    for (n, item) in parsed.into_iter().enumerate() {
        by_log
            .entry(item.log().to_owned())
            .or_default()
            .push((n, item));
    }
    let gate = Arc::new(tokio::sync::Semaphore::new(BATCH_PARALLEL));
    let mut tasks = tokio::task::JoinSet::new();
    for items in by_log.into_values() {
        let (app, gate, group) = (app.clone(), gate.clone(), group.clone());
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            let mut out = Vec::with_capacity(items.len());
            for (n, item) in items {
                let stored = match item {
                    Item::Record {
                        log,
                        host,
                        index,
                        data,
                    } => store_record(&app, &group, &log, &host, index, data).await,
                    Item::Claim { log, chain, data } => {
                        store_claim(&app, &group, &log, &chain, data).await
                    }
                };
                out.push((n, stored));
            }
            out
        });
    }
    let mut answers: Vec<Option<Vec<u8>>> = Vec::new();
    let mut failed = None;
    let mut created = vec![false; sizes.len()];
    while let Some(done) = tasks.join_next().await {
        let Ok(group) = done else {
            failed.get_or_insert_with(|| error(StatusCode::INTERNAL_SERVER_ERROR, "batch failed"));
            continue;
        };
        for (n, stored) in group {
            if let (Ok(Stored::Created), Some(c)) = (&stored, created.get_mut(n)) {
                *c = true;
            }
            if answers.len() <= n {
                answers.resize(n + 1, None);
            }
            answers[n] = Some(match stored {
                Ok(Stored::Created) => vec![1],
                Ok(Stored::Exists(claim)) => std::iter::once(2).chain(claim).collect(),
                Ok(Stored::Gap) => vec![3],
                Err(r) => {
                    failed.get_or_insert(*r);
                    continue;
                }
            });
        }
    }
    let (kept, n) = sizes
        .iter()
        .zip(&created)
        .filter(|(_, c)| !**c)
        .fold((0, 0), |(b, n), (s, _)| (b + s, n + 1));
    app.quotas.release(&held, kept, n);
    if let Some(r) = failed {
        return r;
    }
    let answers: Vec<Vec<u8>> = answers.into_iter().map(Option::unwrap_or_default).collect();
    let mut r = Response::new(Body::from(crate::home_sync::remote::frame(&answers)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r
}

#[derive(serde::Deserialize)]
pub(crate) struct From {
    from: Option<u64>,
}

/// `GET /sync/v1/logs/{log}/{host}?from=N`.
pub(crate) async fn get_records(
    State(app): State<Arc<App>>,
    Path((log, host)): Path<(String, String)>,
    Query(from): Query<From>,
    headers: HeaderMap,
) -> Response {
    let group = match authorize(&app, &headers, Need::Read).await {
        Ok(g) => g,
        Err(r) => return *r,
    };
    if !is_hex(&log, 32) || !is_hex(&host, 32) {
        return bad_id();
    }
    let mut next = from.from.unwrap_or(0);
    let mut out = Vec::new();
    while let Some(group) = &group {
        let i = index_segment(next);
        let Some(key) = group.key([LOGS, log.as_str(), host.as_str(), i.as_str()]) else {
            return bad_id();
        };
        let data = match app.store.sync_get(&key).await {
            Ok(Some(d)) => d,
            Ok(None) => break,
            Err(e) => return store_failed("get", &e),
        };
        if !out.is_empty() && out.len() + data.len() + 4 > app.max_body {
            break;
        }
        out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(&data);
        next += 1;
    }
    let mut r = Response::new(Body::from(out));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&next.to_string()) {
        h.insert(crate::home_sync::remote::NEXT_HEADER, v);
    }
    r
}

/// `PUT /sync/v1/claims/{log}/{chain}`.
pub(crate) async fn put_claim(
    State(app): State<Arc<App>>,
    Path((log, chain)): Path<(String, String)>,
    request: Request,
) -> Response {
    let group = match writer(&app, request.headers()).await {
        Ok(g) => g,
        Err(r) => return *r,
    };
    if !is_hex(&log, 32) || !is_hex(&chain, 64) {
        return bad_id();
    }
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let size = data.len() as u64;
    let held = match app.quotas.reserve(&app, &group, size, 1).await {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let stored = store_claim(&app, &group, &log, &chain, data).await;
    if !matches!(stored, Ok(Stored::Created)) {
        app.quotas.release(&held, size, 1);
    }
    match stored {
        Ok(Stored::Created) => StatusCode::CREATED.into_response(),
        Ok(Stored::Exists(existing)) => (StatusCode::CONFLICT, existing).into_response(),
        Ok(Stored::Gap) => error(StatusCode::INTERNAL_SERVER_ERROR, "claims have no gaps"),
        Err(r) => *r,
    }
}

/// `DELETE /sync/v1/logs/{log}`.
pub(crate) async fn delete_log(
    State(app): State<Arc<App>>,
    Path(log): Path<String>,
    headers: HeaderMap,
) -> Response {
    let group = match authorize(&app, &headers, Need::Read).await {
        Ok(Some(g)) => g,
        // A group that has nothing has no log to remove.
        Ok(None) => return StatusCode::NO_CONTENT.into_response(),
        Err(r) => return *r,
    };
    if !is_hex(&log, 32) {
        return bad_id();
    }
    for top in [LOGS, CLAIMS] {
        let Some(under) = group.key([top, log.as_str()]) else {
            return bad_id();
        };
        if let Err(r) = remove_under(&app, &under).await {
            return r;
        }
    }
    forget_status(&app, &group);
    app.quotas.forget(&group);
    StatusCode::NO_CONTENT.into_response()
}

/// Removes every object below `under`; the answer to give when the store fails.
async fn remove_under(app: &App, under: &crate::blob::SyncKey) -> Result<(), Response> {
    let keys = app
        .store
        .sync_list(under)
        .await
        .map_err(|e| store_failed("list", &e))?;
    for key in keys {
        app.store
            .sync_remove(&key)
            .await
            .map_err(|e| store_failed("delete", &e))?;
    }
    Ok(())
}

/// `DELETE /sync/v1/logs/{log}/{host}`: one host's records of a log, and nothing else
/// (`sync compact` removing what a member wrote that never opens). `204`.
pub(crate) async fn delete_host_log(
    State(app): State<Arc<App>>,
    Path((log, host)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let group = match authorize(&app, &headers, Need::Read).await {
        Ok(Some(g)) => g,
        Ok(None) => return StatusCode::NO_CONTENT.into_response(),
        Err(r) => return *r,
    };
    if !is_hex(&log, 32) || !is_hex(&host, 32) {
        return bad_id();
    }
    let Some(under) = group.key([LOGS, log.as_str(), host.as_str()]) else {
        return bad_id();
    };
    if let Err(r) = remove_under(&app, &under).await {
        return r;
    }
    forget_status(&app, &group);
    app.quotas.forget(&group);
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /sync/v1/logs/{log}/{host}/{index}/wrap`.
pub(crate) async fn rewrap_record(
    State(app): State<Arc<App>>,
    Path((log, host, index)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    use crate::home_sync::seal::WRAP_SPAN;
    let group = match authorize(&app, request.headers(), Need::Read).await {
        Ok(Some(g)) => g,
        Ok(None) => return error(StatusCode::NOT_FOUND, "no record at this index"),
        Err(r) => return *r,
    };
    let Some(index) = record_index(&log, &host, &index) else {
        return bad_id();
    };
    let i = index_segment(index);
    let Some(key) = group.key([LOGS, log.as_str(), host.as_str(), i.as_str()]) else {
        return bad_id();
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    if data.len() != WRAP_SPAN.len() {
        return error(
            StatusCode::BAD_REQUEST,
            format!("a key wrap is {} bytes", WRAP_SPAN.len()),
        );
    }
    let old = match app.store.sync_get(&key).await {
        Ok(Some(d)) if d.len() > WRAP_SPAN.end => d,
        Ok(_) => return error(StatusCode::NOT_FOUND, "no record at this index"),
        Err(e) => return store_failed("get", &e),
    };
    let mut new = old.to_vec();
    new[WRAP_SPAN].copy_from_slice(&data);
    match app.store.sync_replace(&key, Bytes::from(new)).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => store_failed("put", &e),
    }
}

/// `PUT /sync/v1/rings/{key}`.
pub(crate) async fn put_ring(
    State(app): State<Arc<App>>,
    Path(key_id): Path<String>,
    request: Request,
) -> Response {
    let group = match writer(&app, request.headers()).await {
        Ok(g) => g,
        Err(r) => return *r,
    };
    let Some(key) = is_hex(&key_id, 16)
        .then(|| group.key([RINGS, key_id.as_str()]))
        .flatten()
    else {
        return bad_id();
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let size = data.len() as u64;
    let held = match app.quotas.reserve(&app, &group, size, 1).await {
        Ok(h) => h,
        Err(r) => return *r,
    };
    let stored = app.store.sync_create(&key, data).await;
    if stored.is_err() {
        app.quotas.release(&held, size, 1);
    }
    match stored {
        Ok(()) => StatusCode::CREATED.into_response(),
        Err(BlobError::AlreadyExists { .. }) => {
            conflict("exists", "this key already has a key ring".to_owned())
        }
        Err(e) => store_failed("put", &e),
    }
}

/// `GET /sync/v1/rings/{key}`.
pub(crate) async fn get_ring(
    State(app): State<Arc<App>>,
    Path(key_id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let group = match authorize(&app, &headers, Need::Read).await {
        Ok(Some(g)) => g,
        Ok(None) => return error(StatusCode::NOT_FOUND, "no key ring for this key"),
        Err(r) => return *r,
    };
    let Some(key) = is_hex(&key_id, 16)
        .then(|| group.key([RINGS, key_id.as_str()]))
        .flatten()
    else {
        return bad_id();
    };
    match app.store.sync_get(&key).await {
        Ok(Some(d)) => {
            let mut r = Response::new(Body::from(d));
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        }
        Ok(None) => error(StatusCode::NOT_FOUND, "no key ring for this key"),
        Err(e) => store_failed("get", &e),
    }
}
