//! The share endpoints: `POST /upload`, `GET /{code}`, `DELETE /{code}` (the bundles people
//! share, end to end encrypted by the client; see [`super`] for the API).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{FromRequest as _, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::blob::{BlobError, BlobStore, ShareCode, random_hex};

use super::record::{RECORD_VERSION, ShareRecord, now_ms, sha256};
use super::redact::redacted;
use super::rules::unauthorized;
use super::{App, error, too_large};

/// Request header: requested lifetime of an upload, in whole seconds.
pub const EXPIRES_IN_HEADER: &str = "x-freecode-expires-in";
/// Response header on download: the share's expiry, milliseconds since the Unix epoch.
pub const EXPIRES_AT_HEADER: &str = "x-freecode-expires-at";
/// Request header on revoke: the delete token returned by the upload.
pub const DELETE_TOKEN_HEADER: &str = "x-freecode-delete-token";

/// Content type recorded when the upload names none.
const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";
/// Longest content type accepted.
const MAX_CONTENT_TYPE_LEN: usize = 255;
/// Attempts at a fresh code if one is somehow taken (128 random bits: never, in practice).
const CODE_ATTEMPTS: usize = 3;

/// A store failure: logged (codes in paths and keys shortened), answered without internals.
fn storage_error(op: &'static str, code: &ShareCode, err: &BlobError) -> Response {
    tracing::error!(op, code = code.short(), error = %redacted(err), "store request failed");
    error(StatusCode::INTERNAL_SERVER_ERROR, "storage error")
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "no such share")
}

/// `POST /upload`.
pub(crate) async fn upload(State(app): State<Arc<App>>, request: Request) -> Response {
    let headers = request.headers();
    if let Some(refused) = unauthorized(&app, headers) {
        return refused;
    }
    let ttl_ms = match requested_ttl_ms(headers, app.default_ttl, app.max_ttl) {
        Ok(ms) => ms,
        Err(message) => return error(StatusCode::BAD_REQUEST, message),
    };
    let content_type = match headers.get(header::CONTENT_TYPE) {
        None => DEFAULT_CONTENT_TYPE.to_owned(),
        Some(v) => match v.to_str() {
            Ok(s) if !s.trim().is_empty() && s.len() <= MAX_CONTENT_TYPE_LEN => s.trim().to_owned(),
            _ => return error(StatusCode::BAD_REQUEST, "unusable Content-Type"),
        },
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > app.max_body as u64) {
        return too_large(app.max_body);
    }
    // Before the body is read: a URL clients would refuse must not cost a stored blob.
    let Some(base) = public_base(&app, headers) else {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "this share server has no public URL configured (--public-url https://…), so it \
             cannot hand out a share URL clients accept here",
        );
    };

    // Bounded by the router's DefaultBodyLimit: past it, a 413 rejection.
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return too_large(app.max_body);
        }
        Err(rejection) => return error(rejection.status(), rejection.body_text()),
    };
    if body.is_empty() {
        return error(StatusCode::BAD_REQUEST, "empty body");
    }

    let (Ok(delete_token), Ok(mut code)) = (random_hex::<32>(), ShareCode::random()) else {
        tracing::error!("random source failed");
        return error(StatusCode::INTERNAL_SERVER_ERROR, "random source failed");
    };
    let size = body.len() as u64;
    let mut attempt = 1;
    // Blob first, create-if-absent; the record (the commit point) last.
    loop {
        match app.store.put_blob(&code, body.clone()).await {
            Ok(()) => break,
            Err(BlobError::AlreadyExists { .. }) if attempt < CODE_ATTEMPTS => {
                attempt += 1;
                match ShareCode::random() {
                    Ok(fresh) => code = fresh,
                    Err(_) => {
                        return error(StatusCode::INTERNAL_SERVER_ERROR, "random source failed");
                    }
                }
            }
            Err(e) => return storage_error("put blob", &code, &e),
        }
    }
    let created_at = now_ms();
    let record = ShareRecord {
        version: RECORD_VERSION,
        content_type,
        size,
        created_at,
        expires_at: created_at.saturating_add(ttl_ms),
        delete_token_sha256: hex::encode(sha256(delete_token.as_bytes())),
    };
    let record_json = match serde_json::to_vec(&record) {
        Ok(json) => json,
        Err(e) => {
            tracing::error!(error = %e, "serializing record failed");
            return error(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    };
    if let Err(e) = app.store.put_record(&code, Bytes::from(record_json)).await {
        // Best effort: without a record the blob is unreachable; the sweeper gets it otherwise.
        let _ = app.store.delete_blob(&code).await;
        return storage_error("put record", &code, &e);
    }
    tracing::debug!(
        code = code.short(),
        size,
        expires_at = record.expires_at,
        "stored share"
    );

    let mut response = (
        StatusCode::CREATED,
        Json(json!({
            "url": format!("{base}/{code}"),
            "code": code.as_str(),
            "expiresAt": record.expires_at,
            "deleteToken": delete_token,
        })),
    )
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The lifetime asked for in [`EXPIRES_IN_HEADER`], clamped to `1 s ..= max`; `default`
/// (clamped the same way) when absent.
fn requested_ttl_ms(headers: &HeaderMap, default: Duration, max: Duration) -> Result<u64, String> {
    let max_s = i64::try_from(max.as_secs()).unwrap_or(i64::MAX).max(1);
    let secs = match headers.get(EXPIRES_IN_HEADER) {
        None => i64::try_from(default.as_secs()).unwrap_or(i64::MAX),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .ok_or_else(|| format!("{EXPIRES_IN_HEADER} must be an integer number of seconds"))?,
    };
    let secs = u64::try_from(secs.clamp(1, max_s)).unwrap_or(1);
    Ok(secs.saturating_mul(1000))
}

/// The base of share URLs: the configured public URL, else `http://<Host>` (a Host that is not
/// a plain host[:port] falls back to the listening address). Without a public URL, a request
/// whose URL clients would refuse (a non-loopback Host) or that arrived over TLS through a
/// proxy (`X-Forwarded-Proto: https`, `Forwarded: proto=https`) gets `None` (logged): the
/// server is misconfigured, and the uploader must learn it before anything is stored.
fn public_base(app: &App, headers: &HeaderMap) -> Option<String> {
    if let Some(url) = &app.public_url {
        return Some(url.trim_end_matches('/').to_owned());
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.len() <= 255
                && h.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b".-:[]".contains(&c))
        });
    let base = match host {
        Some(host) => format!("http://{host}"),
        None => format!("http://{}", app.local_addr),
    };
    let behind_tls = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
        || headers
            .get(header::FORWARDED)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("proto=https"));
    if behind_tls || crate::share::check_transport(&base).is_err() {
        tracing::warn!(
            base = %base,
            behind_tls,
            "upload refused: no public_url, and clients would refuse this http:// share URL"
        );
        return None;
    }
    Some(base)
}

/// Validates a path segment as a code; anything else is simply "no such share".
fn parse_code(
    code: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Option<ShareCode> {
    ShareCode::parse(&code.ok()?.0)
}

/// Reads and parses a record.
async fn load_record(store: &BlobStore, code: &ShareCode) -> Result<Option<ShareRecord>, Response> {
    let Some(bytes) = store
        .get_record(code)
        .await
        .map_err(|e| storage_error("get record", code, &e))?
    else {
        return Ok(None);
    };
    match serde_json::from_slice::<ShareRecord>(&bytes) {
        Ok(record) => Ok(Some(record)),
        Err(e) => {
            tracing::error!(code = code.short(), error = %redacted(&e), "unreadable record");
            Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unreadable share record",
            ))
        }
    }
}

/// The share a `/{code}` request names, with its record; else the answer to give (404 for a
/// malformed or unknown code, 500 for an unreadable record).
async fn find_share(
    app: &App,
    code: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Result<(ShareCode, ShareRecord), Response> {
    let code = parse_code(code).ok_or_else(not_found)?;
    match load_record(&app.store, &code).await? {
        Some(record) => Ok((code, record)),
        None => Err(not_found()),
    }
}

/// `GET /{code}`.
pub(crate) async fn download(
    State(app): State<Arc<App>>,
    code: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Response {
    let (code, record) = match find_share(&app, code).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    if record.expired(now_ms()) {
        if let Err(e) = app.store.delete(&code).await {
            tracing::warn!(code = code.short(), error = %redacted(&e), "removing expired share failed");
        }
        return error(StatusCode::GONE, "share expired");
    }
    let data = match app.store.get_blob(&code).await {
        Ok(Some(data)) => data,
        Ok(None) => {
            // Revoked between the two reads, or damaged: either way not servable.
            tracing::warn!(code = code.short(), "record without blob");
            return not_found();
        }
        Err(e) => return storage_error("get blob", &code, &e),
    };
    let content_type = HeaderValue::from_str(&record.content_type)
        .unwrap_or_else(|_| HeaderValue::from_static(DEFAULT_CONTENT_TYPE));
    let mut response = Response::new(Body::from(data));
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, content_type);
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(EXPIRES_AT_HEADER, HeaderValue::from(record.expires_at));
    // The bytes are someone else's: never let a browser run or sniff them on this origin.
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `DELETE /{code}`.
pub(crate) async fn revoke(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    code: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> Response {
    let (code, record) = match find_share(&app, code).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let token = headers
        .get(DELETE_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok());
    if !token.is_some_and(|t| record.token_matches(t.trim())) {
        return error(StatusCode::FORBIDDEN, "missing or wrong delete token");
    }
    match app.store.delete(&code).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => storage_error("delete", &code, &e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ttl(value: Option<&str>) -> Result<u64, String> {
        let mut headers = HeaderMap::new();
        if let Some(v) = value {
            headers.insert(EXPIRES_IN_HEADER, HeaderValue::from_str(v).unwrap());
        }
        requested_ttl_ms(
            &headers,
            Duration::from_secs(7 * 86400),
            Duration::from_secs(30 * 86400),
        )
    }

    #[test]
    fn ttl_parsing_and_clamping() {
        assert_eq!(ttl(None).unwrap(), 7 * 86400 * 1000);
        assert_eq!(ttl(Some("60")).unwrap(), 60_000);
        assert_eq!(ttl(Some(" 60 ")).unwrap(), 60_000);
        assert_eq!(ttl(Some("0")).unwrap(), 1000);
        assert_eq!(ttl(Some("-5")).unwrap(), 1000);
        assert_eq!(ttl(Some("999999999")).unwrap(), 30 * 86400 * 1000);
        for bad in ["", "1.5", "abc", "1e3", "99999999999999999999999"] {
            assert!(ttl(Some(bad)).is_err(), "{bad}");
        }
    }
}
