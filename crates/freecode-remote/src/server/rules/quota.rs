//! Limits per sync group: bytes and objects stored, and requests a minute.
//!
//! - **Requests**: a token bucket per group, [`GroupLimits::requests_per_minute`] deep and
//!   refilled at that rate, so a first sync may burst a minute's worth at once. Past it,
//!   `429 {"code": "rate", "limit": "requestsPerMinute", "max": N}` with `Retry-After`
//!   (clients wait and try again). Kept per replica, in memory: N replicas admit up to N times
//!   the rate between them.
//! - **Bytes and objects**: what a group's objects take (`groups/<id>/…`, its records, claims
//!   and key rings), counted from a listing of the store plus what went in through this
//!   replica since. A listing walks every object of the group, so it is made again only when
//!   the count is [`USAGE_MAX_AGE`] old, or [`USAGE_TTL`] old and the write would take the
//!   group past half a limit: a refusal is never decided on a count older than that. A write that would pass a limit is refused whole
//!   before anything is stored (a batch as a whole): `413 {"code": "quota", "limit": "bytes"
//!   or "objects", "max", "used"}`. What other replicas stored since the listing is seen at the
//!   next one, so replicas may overshoot by what they take between two listings.
//!
//! The share server's own limits (body size, concurrency, timeouts) are not these.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::group::{GROUP_OBJECTS, Group};
use super::{Bucket, take};
use crate::server::{App, error, store_failed};

/// How old a group's counted usage may get before a write that takes the group past half a
/// limit lists the store again.
pub const USAGE_TTL: Duration = Duration::from_secs(60);
/// How old a group's counted usage may get at all.
pub const USAGE_MAX_AGE: Duration = Duration::from_secs(3600);
/// Groups a replica keeps counts of before it starts over.
const MAX_GROUPS: usize = 65_536;

/// What one sync group may hold and do. `Default`: 10 GiB, 1,000,000 objects, 6,000 requests a
/// minute (a first sync of tens of thousands of sessions bursts, then waits its turn).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupLimits {
    /// Bytes of a group's objects.
    pub max_bytes: u64,
    /// A group's objects (records, claims, key rings).
    pub max_objects: u64,
    /// Requests a minute, per replica.
    pub requests_per_minute: u32,
}

impl Default for GroupLimits {
    fn default() -> Self {
        Self {
            max_bytes: 10 << 30,
            max_objects: 1_000_000,
            requests_per_minute: 6_000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Counted {
    bytes: u64,
    objects: u64,
    listed: Instant,
}

/// A replica's counts per group.
#[derive(Debug, Default)]
pub(crate) struct Quotas {
    limits: GroupLimits,
    rate: Mutex<HashMap<String, Bucket>>,
    usage: Mutex<HashMap<String, Counted>>,
}

/// A write's place in its group's quota, taken before it is stored: given back for what was
/// not stored.
#[must_use]
pub(crate) struct Reserved {
    group: String,
    bytes: u64,
    objects: u64,
}

fn over(status: StatusCode, body: serde_json::Value) -> Box<Response> {
    let mut r = (status, Json(body)).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Box::new(r)
}

impl Quotas {
    pub fn new(limits: GroupLimits) -> Self {
        Self {
            limits,
            ..Self::default()
        }
    }

    /// One request of `group`, within its rate or refused with 429.
    pub fn admit(&self, group: &Group) -> Result<(), Box<Response>> {
        let per_minute = f64::from(self.limits.requests_per_minute);
        let Ok(mut m) = self.rate.lock() else {
            return Ok(());
        };
        if m.len() >= MAX_GROUPS && !m.contains_key(&group.id) {
            m.clear();
        }
        let now = Instant::now();
        let b = m.entry(group.id.clone()).or_insert(Bucket {
            tokens: per_minute,
            at: now,
        });
        let Some(wait) = take(
            b,
            self.limits.requests_per_minute,
            Duration::from_secs(60),
            now,
        ) else {
            return Ok(());
        };
        let mut r = over(
            StatusCode::TOO_MANY_REQUESTS,
            json!({
                "error": format!(
                    "this sync group is past its {} requests a minute on this server: \
                     try again in {wait} s",
                    self.limits.requests_per_minute
                ),
                "code": "rate",
                "limit": "requestsPerMinute",
                "max": self.limits.requests_per_minute,
            }),
        );
        if let Ok(v) = HeaderValue::from_str(&format!("{wait}")) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        Err(r)
    }

    /// Room in `group`'s quota for `objects` more objects of `bytes` in all, taken now;
    /// refused with 413 naming the limit when there is none.
    pub async fn reserve(
        &self,
        app: &App,
        group: &Group,
        bytes: u64,
        objects: u64,
    ) -> Result<Reserved, Box<Response>> {
        let l = self.limits;
        // Listing a group walks all of its objects: done when there is no count, when the
        // count is an hour old, and when it is older than USAGE_TTL and this write would take
        // the group past half a limit (so a refusal is never decided on an old count).
        let list = match self
            .usage
            .lock()
            .ok()
            .and_then(|m| m.get(&group.id).copied())
        {
            None => true,
            Some(c) => {
                let age = c.listed.elapsed();
                let near = |used: u64, adding: u64, max: u64| used.saturating_add(adding) * 2 > max;
                age >= USAGE_MAX_AGE
                    || (age >= USAGE_TTL
                        && (near(c.bytes, bytes, l.max_bytes)
                            || near(c.objects, objects, l.max_objects)))
            }
        };
        if list {
            let listed = Instant::now();
            let (mut n, mut b) = (0u64, 0u64);
            // The group's own objects; its `group` object is the server's bookkeeping.
            for top in GROUP_OBJECTS {
                let Some(under) = group.key([top]) else {
                    return Err(Box::new(error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "bad group",
                    )));
                };
                let (objects, bytes) = app
                    .store
                    .sync_usage(&under)
                    .await
                    .map_err(|e| Box::new(store_failed("list", &e)))?;
                n += objects;
                b += bytes;
            }
            if let Ok(mut m) = self.usage.lock() {
                if m.len() >= MAX_GROUPS && !m.contains_key(&group.id) {
                    m.clear();
                }
                m.insert(
                    group.id.clone(),
                    Counted {
                        bytes: b,
                        objects: n,
                        listed,
                    },
                );
            }
        }
        let Ok(mut m) = self.usage.lock() else {
            return Err(Box::new(error(StatusCode::INTERNAL_SERVER_ERROR, "busy")));
        };
        let Some(c) = m.get_mut(&group.id) else {
            return Err(Box::new(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "try again",
            )));
        };
        for (name, used, adding, max) in [
            ("bytes", c.bytes, bytes, l.max_bytes),
            ("objects", c.objects, objects, l.max_objects),
        ] {
            if used.saturating_add(adding) > max {
                return Err(over(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    json!({
                        "error": format!(
                            "this sync group would pass its limit of {max} {name} on this \
                             server ({used} used, {adding} more asked): nothing was stored"
                        ),
                        "code": "quota",
                        "limit": name,
                        "max": max,
                        "used": used,
                    }),
                ));
            }
        }
        c.bytes += bytes;
        c.objects += objects;
        Ok(Reserved {
            group: group.id.clone(),
            bytes,
            objects,
        })
    }

    /// Gives back what of `r` was not stored: `bytes` in `objects` objects.
    pub fn release(&self, r: &Reserved, bytes: u64, objects: u64) {
        if let Ok(mut m) = self.usage.lock()
            && let Some(c) = m.get_mut(&r.group)
        {
            c.bytes = c.bytes.saturating_sub(bytes.min(r.bytes));
            c.objects = c.objects.saturating_sub(objects.min(r.objects));
        }
    }

    /// Forgets `group`'s count (objects were removed): the next write lists again.
    pub fn forget(&self, group: &Group) {
        if let Ok(mut m) = self.usage.lock() {
            m.remove(&group.id);
        }
    }
}
