//! What a client the server does not know yet may spend: new sync groups, and requests with a
//! credential that names no group or one rotated out.
//!
//! - **New groups**: the first write with a credential the server has never seen makes a group
//!   with limits of its own ([`super::quota`]), so a server open to anyone (no `--api-key`)
//!   would give each request a new 10 GiB. Without an API key, a client address may make
//!   [`StrangerLimits::new_groups_per_address`] groups an hour, and the replica
//!   [`StrangerLimits::new_groups_per_hour`] in all; past either, `429 {"code": "new-groups"}`
//!   with `Retry-After`. With an API key, whoever holds it decides (no limit here).
//! - **Unknown credentials**: a read with a credential no group has answers as an empty group
//!   after a lookup in the store, and a credential rotated out or not current is refused after
//!   one: a client address gets [`StrangerLimits::unknown_per_address_per_minute`] of those a
//!   minute, then `429 {"code": "unknown-rate"}`. A member's requests never count here.
//!
//! The address is the connection's peer (set by `freecode-http` on every request, never
//! taken from a header the client sends); behind a reverse proxy every client is the proxy,
//! so run such a server with an API key. Counts are per replica, in memory, in token buckets
//! (a burst of the hour's or minute's worth, then the rate), at most [`MAX_ADDRESSES`]
//! addresses kept.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{Bucket, take};

/// Addresses a replica keeps buckets of before it starts over.
const MAX_ADDRESSES: usize = 65_536;
/// The header the peer middleware sets (any the client sent is replaced).
pub(crate) const PEER_HEADER: &str = "x-freecode-peer";

/// What strangers may spend (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrangerLimits {
    /// New groups one client address may make an hour (without an API key).
    pub new_groups_per_address: u32,
    /// New groups this replica makes an hour in all (without an API key).
    pub new_groups_per_hour: u32,
    /// Requests a minute from one address with a credential that names no group, or one
    /// rotated out or not current.
    pub unknown_per_address_per_minute: u32,
}

impl Default for StrangerLimits {
    fn default() -> Self {
        Self {
            new_groups_per_address: 20,
            new_groups_per_hour: 1_000,
            unknown_per_address_per_minute: 120,
        }
    }
}

/// A replica's buckets.
#[derive(Debug, Default)]
pub(crate) struct Strangers {
    limits: StrangerLimits,
    new_groups: Mutex<HashMap<IpAddr, Bucket>>,
    all_new_groups: Mutex<Option<Bucket>>,
    unknown: Mutex<HashMap<IpAddr, Bucket>>,
}

fn too_many(code: &'static str, message: String, wait: u64) -> Box<Response> {
    let mut r = (
        StatusCode::TOO_MANY_REQUESTS,
        Json(json!({ "error": message, "code": code })),
    )
        .into_response();
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
        h.insert(header::RETRY_AFTER, v);
    }
    Box::new(r)
}

/// The client address the peer middleware put on the request.
pub(crate) fn peer(headers: &HeaderMap) -> Option<IpAddr> {
    headers.get(PEER_HEADER)?.to_str().ok()?.parse().ok()
}

fn bucket(m: &mut HashMap<IpAddr, Bucket>, ip: IpAddr, depth: u32, now: Instant) -> &mut Bucket {
    if m.len() >= MAX_ADDRESSES && !m.contains_key(&ip) {
        m.clear();
    }
    m.entry(ip).or_insert(Bucket {
        tokens: f64::from(depth),
        at: now,
    })
}

const HOUR: Duration = Duration::from_secs(3600);
const MINUTE: Duration = Duration::from_secs(60);

impl Strangers {
    pub(crate) fn new(limits: StrangerLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// A new group for the client at `headers`' address, or 429.
    pub(crate) fn new_group(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        let now = Instant::now();
        let l = self.limits;
        if let (Some(ip), Ok(mut m)) = (peer(headers), self.new_groups.lock()) {
            let b = bucket(&mut m, ip, l.new_groups_per_address, now);
            if let Some(wait) = take(b, l.new_groups_per_address, HOUR, now) {
                return Err(too_many(
                    "new-groups",
                    format!(
                        "this address made {} new sync groups this hour, as many as this server \
                         lets one address make without an API key: try again in {wait} s",
                        l.new_groups_per_address
                    ),
                    wait,
                ));
            }
        }
        if let Ok(mut all) = self.all_new_groups.lock() {
            let b = all.get_or_insert(Bucket {
                tokens: f64::from(l.new_groups_per_hour),
                at: now,
            });
            if let Some(wait) = take(b, l.new_groups_per_hour, HOUR, now) {
                return Err(too_many(
                    "new-groups",
                    format!(
                        "this server made {} new sync groups this hour, as many as it makes \
                         without an API key: try again in {wait} s",
                        l.new_groups_per_hour
                    ),
                    wait,
                ));
            }
        }
        Ok(())
    }

    /// One request with a credential that names no group (or one rotated out or not
    /// current) from the client at `headers`' address, or 429.
    pub(crate) fn unknown(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        let l = self.limits.unknown_per_address_per_minute;
        let now = Instant::now();
        let (Some(ip), Ok(mut m)) = (peer(headers), self.unknown.lock()) else {
            return Ok(());
        };
        let b = bucket(&mut m, ip, l, now);
        match take(b, l, MINUTE, now) {
            None => Ok(()),
            Some(wait) => Err(too_many(
                "unknown-rate",
                format!(
                    "this address sent {l} requests a minute with sync credentials that name no \
                     group here (or one rotated out): try again in {wait} s"
                ),
                wait,
            )),
        }
    }
}

/// Middleware: the connection's peer address in [`PEER_HEADER`], replacing any the client
/// sent (so no rule ever reads an address a client chose).
pub(crate) async fn mark_peer(
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let headers = request.headers_mut();
    headers.remove(PEER_HEADER);
    if let Some(ip) = peer
        && let Ok(v) = HeaderValue::from_str(&ip.to_string())
    {
        headers.insert(PEER_HEADER, v);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_bursts_its_depth_then_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = Bucket {
            tokens: 3.0,
            at: t0,
        };
        for _ in 0..3 {
            assert_eq!(take(&mut b, 3, HOUR, t0), None);
        }
        assert_eq!(take(&mut b, 3, HOUR, t0), Some(1200));
        assert_eq!(take(&mut b, 3, HOUR, t0 + Duration::from_secs(1200)), None);
        assert!(take(&mut b, 3, HOUR, t0 + Duration::from_secs(1200)).is_some());
    }
}
