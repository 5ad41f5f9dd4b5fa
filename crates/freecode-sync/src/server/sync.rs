//! The home-sync endpoints, `/sync/v1/`: sealed records in per-(log, host) logs with dense
//! indexes, and claims. The server cannot read either; it keeps their order and refuses what
//! would break it.
//!
//! - `GET /sync/v1/status`: `{"logs": [{"log", "host", "count"}]}`, counted from a listing of
//!   the store (a log's count is its run of indexes from 0), so replicas agree without state.
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
//!   rotation (the bytes [`WRAP_SPAN`](crate::home::seal::WRAP_SPAN) of the record, nothing
//!   else: the content is never sent again, and a rewrap cannot change it): `200`; `404`
//!   without a record there; `400` for a body of another length.
//! - `PUT /sync/v1/rings/{key id}`: a rotated key's sealed key ring, create-only (`201`,
//!   `409 {"code": "exists"}`); `GET` it (`200`, or `404`).
//!
//! Every endpoint needs the API key when the server has one. Ids are 32 (chains 64) lowercase
//! hex characters and indexes decimal, so no request names anything else in the store.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest as _, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::handlers::{App, error, too_large, unauthorized};
use super::redact::redacted;
use crate::blob::{BlobError, SyncKey};

const LOGS: &str = "logs";
const CLAIMS: &str = "claims";
const RINGS: &str = "rings";

/// How long a replica answers `status` from its last listing.
pub const STATUS_TTL: std::time::Duration = std::time::Duration::from_secs(1);

fn forget_status(app: &App) {
    app.sync_writes
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    if let Ok(mut s) = app.sync_status.lock() {
        *s = None;
    }
}

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

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'))
}

fn index_segment(index: u64) -> String {
    format!("{index:020}")
}

fn bad_id() -> Response {
    error(StatusCode::BAD_REQUEST, "malformed log, host or chain id")
}

fn store_failed(op: &'static str, err: &BlobError) -> Response {
    tracing::error!(op, error = %redacted(err), "sync store request failed");
    error(StatusCode::INTERNAL_SERVER_ERROR, "storage error")
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

/// `GET /sync/v1/status`.
pub(crate) async fn status(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    let cached = app
        .sync_status
        .lock()
        .ok()
        .and_then(|s| s.clone())
        .filter(|(at, _)| at.elapsed() < STATUS_TTL);
    if let Some((_, json)) = cached {
        return status_response(json);
    }
    let listed_at = std::time::Instant::now();
    let writes = app.sync_writes.load(std::sync::atomic::Ordering::SeqCst);
    let Some(under) = SyncKey::new([LOGS]) else {
        return bad_id();
    };
    let keys = match app.store.sync_list(&under).await {
        Ok(k) => k,
        Err(e) => return store_failed("list", &e),
    };
    let mut indexes: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for key in keys {
        if let [_, log, host, index] = key.segments()
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
        *s = Some((listed_at, json.clone()));
    }
    status_response(json)
}

/// `PUT /sync/v1/logs/{log}/{host}/{index}`.
pub(crate) async fn put_record(
    State(app): State<Arc<App>>,
    Path((log, host, index)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    if let Some(r) = unauthorized(&app, request.headers()) {
        return r;
    }
    let Ok(index) = index.parse::<u64>() else {
        return bad_id();
    };
    if !is_hex(&log, 32) || !is_hex(&host, 32) {
        return bad_id();
    }
    let record = |i: u64| SyncKey::new([LOGS, &log, &host, &index_segment(i)]);
    let Some(key) = record(index) else {
        return bad_id();
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    if index > 0 {
        let Some(prev) = record(index - 1) else {
            return bad_id();
        };
        match app.store.sync_exists(&prev).await {
            Ok(true) => {}
            Ok(false) => {
                return conflict(
                    "gap",
                    format!("record {} of this log is missing", index - 1),
                );
            }
            Err(e) => return store_failed("head", &e),
        }
    }
    match app.store.sync_create(&key, data).await {
        Ok(()) => {
            forget_status(&app);
            (StatusCode::CREATED, Json(json!({ "index": index }))).into_response()
        }
        Err(BlobError::AlreadyExists { .. }) => {
            conflict("exists", format!("record {index} of this log exists"))
        }
        Err(e) => store_failed("put", &e),
    }
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
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    if !is_hex(&log, 32) || !is_hex(&host, 32) {
        return bad_id();
    }
    let mut next = from.from.unwrap_or(0);
    let mut out = Vec::new();
    loop {
        let Some(key) = SyncKey::new([LOGS, &log, &host, &index_segment(next)]) else {
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
        h.insert(crate::home::remote::NEXT_HEADER, v);
    }
    r
}

/// `PUT /sync/v1/claims/{log}/{chain}`.
pub(crate) async fn put_claim(
    State(app): State<Arc<App>>,
    Path((log, chain)): Path<(String, String)>,
    request: Request,
) -> Response {
    if let Some(r) = unauthorized(&app, request.headers()) {
        return r;
    }
    if !is_hex(&log, 32) || !is_hex(&chain, 64) {
        return bad_id();
    }
    let Some(key) = SyncKey::new([CLAIMS, &log, &chain]) else {
        return bad_id();
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match app.store.sync_create(&key, data).await {
        Ok(()) => StatusCode::CREATED.into_response(),
        Err(BlobError::AlreadyExists { .. }) => match app.store.sync_get(&key).await {
            Ok(Some(existing)) => (StatusCode::CONFLICT, existing).into_response(),
            // Purged between the two requests: the client tries again.
            Ok(None) => error(StatusCode::SERVICE_UNAVAILABLE, "claim changed; try again"),
            Err(e) => store_failed("get", &e),
        },
        Err(e) => store_failed("put", &e),
    }
}

/// `DELETE /sync/v1/logs/{log}`.
pub(crate) async fn delete_log(
    State(app): State<Arc<App>>,
    Path(log): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    if !is_hex(&log, 32) {
        return bad_id();
    }
    for top in [LOGS, CLAIMS] {
        let Some(under) = SyncKey::new([top, log.as_str()]) else {
            return bad_id();
        };
        let keys = match app.store.sync_list(&under).await {
            Ok(k) => k,
            Err(e) => return store_failed("list", &e),
        };
        for key in keys {
            if let Err(e) = app.store.sync_remove(&key).await {
                return store_failed("delete", &e);
            }
        }
    }
    forget_status(&app);
    StatusCode::NO_CONTENT.into_response()
}

/// `POST /sync/v1/logs/{log}/{host}/{index}/wrap`.
pub(crate) async fn rewrap_record(
    State(app): State<Arc<App>>,
    Path((log, host, index)): Path<(String, String, String)>,
    request: Request,
) -> Response {
    use crate::home::seal::WRAP_SPAN;
    if let Some(r) = unauthorized(&app, request.headers()) {
        return r;
    }
    let Ok(index) = index.parse::<u64>() else {
        return bad_id();
    };
    if !is_hex(&log, 32) || !is_hex(&host, 32) {
        return bad_id();
    }
    let Some(key) = SyncKey::new([LOGS, &log, &host, &index_segment(index)]) else {
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
    if let Some(r) = unauthorized(&app, request.headers()) {
        return r;
    }
    let Some(key) = is_hex(&key_id, 16)
        .then(|| SyncKey::new([RINGS, &key_id]))
        .flatten()
    else {
        return bad_id();
    };
    let data = match body(&app, request).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    match app.store.sync_create(&key, data).await {
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
    if let Some(r) = unauthorized(&app, &headers) {
        return r;
    }
    let Some(key) = is_hex(&key_id, 16)
        .then(|| SyncKey::new([RINGS, &key_id]))
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
