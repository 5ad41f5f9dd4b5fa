//! The blocking client of the sync endpoints (`/sync/v1/`, see the server's `home_sync` module).
//!
//! Every request carries the API key as a bearer token when one is configured, and the sync
//! group's credential ([`super::SyncKey::credential`]) once [`Remote::for_key`] gave it one;
//! every answer is read within a bound. The client trusts nothing it gets: records are opened by the caller
//! with [`super::SyncKey::open`], and this module only checks the framing.

use std::time::Duration;

use serde::Deserialize;

use super::seal::{Chain, HostId, LogId};
use crate::share::{ClientError, check_transport, read_limited, status_error, transport};

/// The largest answer read from the server: a batch of records, or a status.
pub const MAX_ANSWER: u64 = 64 << 20;
/// Overall timeout of one request.
pub const TIMEOUT: Duration = Duration::from_secs(60);
/// Response header of a download: the index after the last record sent.
pub const NEXT_HEADER: &str = "x-freecode-next";
/// The longest one request waits in all for a server that answers 429 (a group past its
/// request rate) before its answer is taken as an error.
pub const RATE_WAIT: Duration = Duration::from_secs(120);
/// Request header carrying the sync group's credential (the server's `group` module).
pub const CREDENTIAL_HEADER: &str = "x-freecode-remote-credential";

/// One log of one host, as the server counts it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
pub struct LogCount {
    /// The log.
    pub log: LogId,
    /// The host that appends to it.
    pub host: HostId,
    /// How many records it holds (indexes `0..count`).
    pub count: u64,
}

#[derive(Deserialize)]
struct Status {
    logs: Vec<LogCount>,
}

/// What a record upload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// Stored.
    Created,
    /// A record is already at that index (an earlier attempt's, or another writer's).
    Exists,
}

/// What a claim did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// This claim is the one stored.
    Created,
    /// Another claim was there first: its sealed bytes.
    Exists(Vec<u8>),
}

/// One item of a [`Remote::batch`].
#[derive(Debug, Clone, Copy)]
pub enum BatchItem<'a> {
    /// A record, as [`Remote::put_record`] stores it.
    Record {
        /// Its log.
        log: &'a LogId,
        /// Its host.
        host: &'a HostId,
        /// Its index.
        index: u64,
        /// The sealed record.
        sealed: &'a [u8],
    },
    /// A claim, as [`Remote::put_claim`] stores it.
    Claim {
        /// Its log.
        log: &'a LogId,
        /// The chain point claimed.
        base: &'a Chain,
        /// The sealed claim.
        sealed: &'a [u8],
    },
}

impl BatchItem<'_> {
    fn encode(&self) -> Vec<u8> {
        match self {
            Self::Record {
                log,
                host,
                index,
                sealed,
            } => {
                let mut out = Vec::with_capacity(41 + sealed.len());
                out.push(1);
                out.extend_from_slice(log.bytes());
                out.extend_from_slice(host.bytes());
                out.extend_from_slice(&index.to_be_bytes());
                out.extend_from_slice(sealed);
                out
            }
            Self::Claim { log, base, sealed } => {
                let mut out = Vec::with_capacity(49 + sealed.len());
                out.push(2);
                out.extend_from_slice(log.bytes());
                out.extend_from_slice(base.bytes());
                out.extend_from_slice(sealed);
                out
            }
        }
    }
}

/// What the server did with one item of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchAnswer {
    /// Stored.
    Created,
    /// Taken: for a claim, the sealed claim there.
    Exists(Vec<u8>),
    /// The record before it is missing.
    Gap,
}

/// The most bytes of items one batch request carries (under the server's default body
/// limit of 16 MiB).
pub const BATCH_BYTES: usize = 8 << 20;

/// A sync server.
#[derive(Debug, Clone)]
pub struct Remote {
    agent: ureq::Agent,
    base: String,
    api_key: Option<String>,
    credential: Option<String>,
}

impl Remote {
    /// A client of the server at `base` (`https://…`, or `http://` to loopback).
    pub fn new(base: &str, api_key: Option<String>) -> Result<Self, ClientError> {
        let base = base.trim_end_matches('/').to_owned();
        check_transport(&base)?;
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .timeout_global(Some(TIMEOUT))
                .http_status_as_error(false)
                .max_redirects(0)
                .build(),
        );
        Ok(Self {
            agent,
            base,
            api_key: api_key.filter(|k| !k.is_empty()),
            credential: None,
        })
    }

    /// This client speaking for the group of `key`: its requests carry the key's credential.
    #[must_use]
    pub fn for_key(mut self, key: &super::SyncKey) -> Self {
        self.credential = Some(key.credential());
        self
    }

    /// This client with credential `credential` (64 hex characters), as
    /// [`super::SyncKey::credential`] or [`super::SyncKey::older_credentials`] give it.
    #[must_use]
    pub fn with_credential(mut self, credential: String) -> Self {
        self.credential = Some(credential);
        self
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn url(&self, path: &str) -> String {
        format!("{}/sync/v1/{path}", self.base)
    }

    fn auth<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        let req = match &self.api_key {
            Some(k) => req.header("authorization", format!("Bearer {k}")),
            None => req,
        };
        match &self.credential {
            Some(c) => req.header(CREDENTIAL_HEADER, c.as_str()),
            None => req,
        }
    }

    /// Makes the key whose credential's SHA-256 is `hash` ([`super::SyncKey::credential_hash`])
    /// its group's current one, and revokes the credential this client carries: `true` when
    /// it changed, `false` when it was current already.
    pub fn rotate_credential(&self, hash: &str, notice: Option<&str>) -> Result<bool, ClientError> {
        let url = self.url("credential");
        let body = match notice {
            Some(n) => serde_json::json!({ "credential": hash, "notice": n }),
            None => serde_json::json!({ "credential": hash }),
        }
        .to_string();
        let (status, answer) = self.put(&url, body.as_bytes())?;
        if status != 200 {
            return Err(status_error(&url, status, &answer));
        }
        Ok(serde_json::from_slice::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v.get("rotated").and_then(serde_json::Value::as_bool))
            .unwrap_or(true))
    }

    /// What `request` answers, sent again after the server's `Retry-After` while it answers
    /// 429 (the group is past its request rate), for at most [`RATE_WAIT`] in all.
    fn exchange(
        &self,
        url: &str,
        request: impl Fn() -> Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, ClientError> {
        let started = std::time::Instant::now();
        loop {
            let resp = request().map_err(|e| transport(url, e))?;
            if resp.status().as_u16() != 429 {
                return Ok(resp);
            }
            let wait = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(1)
                .max(1);
            let wait = Duration::from_secs(wait);
            // Past a minute (a stranger's new groups an hour, say): said at once, not waited.
            if wait > Duration::from_secs(60) || started.elapsed() + wait > RATE_WAIT {
                return Ok(resp);
            }
            tracing::info!(
                url,
                wait_s = wait.as_secs(),
                "the sync server asks this group to slow down: waiting"
            );
            std::thread::sleep(wait);
        }
    }

    /// `PUT url` with `body`: the status and the (small) answer.
    fn put(&self, url: &str, body: &[u8]) -> Result<(u16, Vec<u8>), ClientError> {
        let mut resp = self.exchange(url, || {
            self.auth(self.agent.put(url))
                .header("content-type", "application/octet-stream")
                .send(body)
        })?;
        let status = resp.status().as_u16();
        Ok((status, read_limited(&mut resp, url, 64 * 1024)?))
    }

    /// Every log on the server with its count.
    pub fn status(&self) -> Result<Vec<LogCount>, ClientError> {
        let url = self.url("status");
        let mut resp = self.exchange(&url, || self.auth(self.agent.get(&url)).call())?;
        let status = resp.status().as_u16();
        let body = read_limited(&mut resp, &url, MAX_ANSWER)?;
        if status != 200 {
            return Err(status_error(&url, status, &body));
        }
        serde_json::from_slice::<Status>(&body)
            .map(|s| s.logs)
            .map_err(|e| ClientError::Protocol {
                url,
                why: format!("status is not the expected JSON: {e}"),
            })
    }

    /// Stores record `index` of `host`'s log `log`, only if that index is free.
    pub fn put_record(
        &self,
        log: &LogId,
        host: &HostId,
        index: u64,
        sealed: &[u8],
    ) -> Result<Put, ClientError> {
        let url = self.url(&format!("logs/{log}/{host}/{index}"));
        let (status, body) = self.put(&url, sealed)?;
        match status {
            201 => Ok(Put::Created),
            409 if is_code(&body, "exists") => Ok(Put::Exists),
            _ => Err(status_error(&url, status, &body)),
        }
    }

    /// Records of `host`'s log `log` from index `from` on, as many as one answer holds, with
    /// the index after the last one. The records are consecutive: the first is `from`.
    pub fn get_records(
        &self,
        log: &LogId,
        host: &HostId,
        from: u64,
    ) -> Result<(Vec<Vec<u8>>, u64), ClientError> {
        let url = self.url(&format!("logs/{log}/{host}?from={from}"));
        let mut resp = self.exchange(&url, || self.auth(self.agent.get(&url)).call())?;
        let status = resp.status().as_u16();
        let next = resp
            .headers()
            .get(NEXT_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let body = read_limited(&mut resp, &url, MAX_ANSWER)?;
        if status != 200 {
            return Err(status_error(&url, status, &body));
        }
        let protocol = |why: String| ClientError::Protocol {
            url: url.clone(),
            why,
        };
        let records = unframe(&body).ok_or_else(|| protocol("records are not framed".into()))?;
        let next = next.ok_or_else(|| protocol(format!("no {NEXT_HEADER} header")))?;
        if next != from + records.len() as u64 {
            return Err(protocol(format!(
                "{} records from {from} but {NEXT_HEADER} says {next}",
                records.len()
            )));
        }
        Ok((records, next))
    }

    /// Claims `log` at `base` (create-only): the first claim stands.
    pub fn put_claim(
        &self,
        log: &LogId,
        base: &Chain,
        sealed: &[u8],
    ) -> Result<Claimed, ClientError> {
        let url = self.url(&format!("claims/{log}/{base}"));
        let (status, body) = self.put(&url, sealed)?;
        match status {
            201 => Ok(Claimed::Created),
            409 => Ok(Claimed::Exists(body)),
            _ => Err(status_error(&url, status, &body)),
        }
    }

    /// Gives record `index` of `host`'s log `log` a new key wrap (its bytes
    /// [`super::seal::WRAP_SPAN`] after a key rotation): `false` when there is no record there.
    pub fn rewrap_record(
        &self,
        log: &LogId,
        host: &HostId,
        index: u64,
        wrap: &[u8],
    ) -> Result<bool, ClientError> {
        let url = self.url(&format!("logs/{log}/{host}/{index}/wrap"));
        let mut resp = self.exchange(&url, || {
            self.auth(self.agent.post(&url))
                .header("content-type", "application/octet-stream")
                .send(wrap)
        })?;
        let status = resp.status().as_u16();
        let body = read_limited(&mut resp, &url, 64 * 1024)?;
        match status {
            200 => Ok(true),
            404 => Ok(false),
            _ => Err(status_error(&url, status, &body)),
        }
    }

    /// Stores the key ring of key `key_id` (create-only): `false` when one is there already.
    pub fn put_ring(&self, key_id: &str, sealed: &[u8]) -> Result<bool, ClientError> {
        let url = self.url(&format!("rings/{key_id}"));
        let (status, body) = self.put(&url, sealed)?;
        match status {
            201 => Ok(true),
            409 if is_code(&body, "exists") => Ok(false),
            _ => Err(status_error(&url, status, &body)),
        }
    }

    /// The key ring of key `key_id`, if the server has one.
    pub fn get_ring(&self, key_id: &str) -> Result<Option<Vec<u8>>, ClientError> {
        let url = self.url(&format!("rings/{key_id}"));
        let mut resp = self.exchange(&url, || self.auth(self.agent.get(&url)).call())?;
        let status = resp.status().as_u16();
        let body = read_limited(&mut resp, &url, 64 * 1024)?;
        match status {
            200 => Ok(Some(body)),
            404 => Ok(None),
            _ => Err(status_error(&url, status, &body)),
        }
    }

    /// Stores claims and records in order, as many requests as [`BATCH_BYTES`] needs (an item
    /// past it goes alone): one answer per item.
    pub fn batch(&self, items: &[BatchItem<'_>]) -> Result<Vec<BatchAnswer>, ClientError> {
        let url = self.url("batch");
        let mut answers = Vec::with_capacity(items.len());
        let mut rest = items;
        while !rest.is_empty() {
            let mut size = 0;
            let take = rest
                .iter()
                .take_while(|i| {
                    let n = match i {
                        BatchItem::Record { sealed, .. } | BatchItem::Claim { sealed, .. } => {
                            sealed.len() + 53
                        }
                    };
                    size += n;
                    size <= BATCH_BYTES
                })
                .count()
                .max(1);
            let (chunk, tail) = rest.split_at(take);
            rest = tail;
            let encoded: Vec<Vec<u8>> = chunk.iter().map(BatchItem::encode).collect();
            let mut resp = self.exchange(&url, || {
                self.auth(self.agent.post(&url))
                    .header("content-type", "application/octet-stream")
                    .send(&frame(&encoded)[..])
            })?;
            let status = resp.status().as_u16();
            let body = read_limited(&mut resp, &url, MAX_ANSWER)?;
            if status != 200 {
                return Err(status_error(&url, status, &body));
            }
            let protocol = |why: &str| ClientError::Protocol {
                url: url.clone(),
                why: why.to_owned(),
            };
            let got = unframe(&body).ok_or_else(|| protocol("the answers are not framed"))?;
            if got.len() != chunk.len() {
                return Err(protocol("not one answer per item"));
            }
            for a in got {
                answers.push(match a.split_first() {
                    Some((1, [])) => BatchAnswer::Created,
                    Some((2, claim)) => BatchAnswer::Exists(claim.to_vec()),
                    Some((3, [])) => BatchAnswer::Gap,
                    _ => return Err(protocol("an answer is not created, taken or gap")),
                });
            }
        }
        Ok(answers)
    }

    /// Removes `host`'s records of `log`, and nothing else (`sync compact`).
    pub fn delete_host_log(&self, log: &LogId, host: &HostId) -> Result<(), ClientError> {
        self.delete(&format!("logs/{log}/{host}"))
    }

    /// Removes every host's records of `log` and its claims (a purge).
    pub fn delete_log(&self, log: &LogId) -> Result<(), ClientError> {
        self.delete(&format!("logs/{log}"))
    }

    /// `DELETE` of `path` below the sync endpoints: `204` (or `200`) is done.
    fn delete(&self, path: &str) -> Result<(), ClientError> {
        let url = self.url(path);
        let mut resp = self.exchange(&url, || self.auth(self.agent.delete(&url)).call())?;
        let status = resp.status().as_u16();
        let body = read_limited(&mut resp, &url, 64 * 1024)?;
        match status {
            204 | 200 => Ok(()),
            _ => Err(status_error(&url, status, &body)),
        }
    }
}

fn is_code(body: &[u8], code: &str) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("code").and_then(|c| c.as_str()).map(|c| c == code))
        .unwrap_or(false)
}

/// Records framed as `u32` big-endian length, then the bytes, one after the other.
pub fn frame(records: &[impl AsRef<[u8]>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let r = r.as_ref();
        out.extend_from_slice(&u32::try_from(r.len()).unwrap_or(u32::MAX).to_be_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// The records of [`frame`]'s output; `None` if it is not whole frames.
pub fn unframe(mut body: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let len = u32::from_be_bytes(body.get(..4)?.try_into().ok()?) as usize;
        let rest = &body[4..];
        out.push(rest.get(..len)?.to_vec());
        body = &rest[len..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn frames_round_trip_and_refuse_a_cut() {
        let recs = [b"a".to_vec(), Vec::new(), vec![9; 300]];
        let f = frame(&recs);
        assert_eq!(unframe(&f).unwrap(), recs);
        assert!(unframe(&f[..f.len() - 1]).is_none());
        assert!(unframe(&f[..3]).is_none());
        assert_eq!(unframe(&[]).unwrap(), Vec::<Vec<u8>>::new());
    }
}
