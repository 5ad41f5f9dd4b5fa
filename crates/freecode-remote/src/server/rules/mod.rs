//! Every rule a request meets before a handler acts on it, in the order it meets them; the
//! one place a new rule goes.
//!
//! | rule | what it refuses | module |
//! |---|---|---|
//! | admission | past [`ServerConfig::max_concurrent`](super::ServerConfig::max_concurrent) requests at once (`503`), a request or its body past its deadline (`408`) | [`admission`] |
//! | body size | a body past [`ServerConfig::max_body`](super::ServerConfig::max_body) (`413`), read by the handler with [`super::too_large`] | the handlers |
//! | API key | with `--api-key`, an upload or any `/sync/v1/` request without it (`401`): it decides who may store anything at all | [`unauthorized`] |
//! | group credential | a `/sync/v1/` request without a credential, or with one rotated out or not current (`401`, `403`); it decides which group's objects a request may touch | [`group`] |
//! | strangers | without `--api-key`, an address past its new groups an hour or the replica past its own (`429 new-groups`); an address past its requests a minute with credentials that name no group or one rotated out (`429 unknown-rate`) | [`strangers`] |
//! | group quota | a group past its requests a minute (`429`), bytes or objects (`413`) | [`quota`] |
//!
//! A share needs no credential beyond its code (a download) or its delete token (a revoke):
//! [`super::share`] checks those.
//!
//! What these rules keep in memory is per replica (see [`super`]'s "State").

pub(crate) mod admission;
pub(crate) mod group;
pub(crate) mod quota;
pub(crate) mod strangers;

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use super::record::secrets_equal;
use super::{App, error};

/// `401` unless the request carries the server's API key (when it has one).
pub(crate) fn unauthorized(app: &App, headers: &HeaderMap) -> Option<Response> {
    let key = app.api_key.as_ref()?;
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    if presented.is_some_and(|token| secrets_equal(token, key)) {
        return None;
    }
    let mut response = error(StatusCode::UNAUTHORIZED, "missing or wrong API key");
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    Some(response)
}

/// A token bucket: how many tokens it holds, as of when.
#[derive(Debug)]
pub(crate) struct Bucket {
    pub(crate) tokens: f64,
    pub(crate) at: Instant,
}

/// Takes one token from `b` (`depth` deep, refilled at `depth` per `per`); the wait until
/// one is there, when none is.
pub(crate) fn take(b: &mut Bucket, depth: u32, per: Duration, now: Instant) -> Option<u64> {
    let depth = f64::from(depth.max(1));
    let rate = depth / per.as_secs_f64();
    b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(depth);
    b.at = now;
    if b.tokens >= 1.0 {
        b.tokens -= 1.0;
        return None;
    }
    Some(((1.0 - b.tokens) / rate).ceil().max(1.0) as u64)
}
