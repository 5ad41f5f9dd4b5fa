//! The share client: upload, download and revoke, plus the local record of shares made.
//!
//! - Transport: HTTPS only, except to loopback (`127.0.0.0/8`, `::1`, `localhost`), where
//!   plain HTTP is allowed for local servers and tests (SPEC §19.8). 30 s overall timeout, like
//!   the original. Downloads are bounded ([`MAX_DOWNLOAD`], or less with the bundle limit
//!   lowered: [`freecode_store::codec::max_bundle_bytes`]).
//! - [`Client::share`] compresses (zstd) and encrypts a bundle under a fresh key
//!   ([`crate::crypto`], envelope v2) and returns the URL with the key in its fragment; `plain`
//!   sends the seed's `{meta, messages}` JSON body to a server that expects it.
//! - [`Client::server_limit`] asks the server for the largest body it takes (`GET /limits`),
//!   so that [`share_session`] knows it before building the bundle and refuses, naming the
//!   limit and the ways past it, before sending a body the server would answer 413.
//! - [`Client::fetch`] downloads and decrypts (or reads a plain body) and validates it as a
//!   bundle; nothing is written here — the caller imports it.
//! - [`ShareLog`] is `shares.jsonl` in the home (0600): every share made, with its delete token,
//!   so `freecode share revoke` works even after the session is purged.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use freecode_core::bundle::{Bundle, BundleError, SourceShape, parse_bundle};
use freecode_store::Home;
use serde::{Deserialize, Serialize};

use crate::crypto::{self, CryptoError, ShareKey};

/// Overall timeout of one request.
pub const TIMEOUT: Duration = Duration::from_secs(30);
/// Largest body a download (or `session import FILE`) reads: what the largest bundle export
/// makes can take, compressed or not ([`freecode_store::codec::max_encoded_bytes`]).
pub const MAX_DOWNLOAD: u64 =
    freecode_store::codec::max_encoded_bytes(freecode_core::bundle::MAX_BUNDLE_BYTES);
/// Default share lifetime, days (`syncUrlExpiryDays`).
pub const DEFAULT_EXPIRY_DAYS: u64 = 7;

/// Why a share operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Not a URL this client can use.
    #[error("invalid URL {url:?}: {why}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Plain HTTP to a host that is not loopback.
    #[error(
        "refusing to send a session over plain HTTP to {host}: use https:// (plain http is allowed only to loopback)"
    )]
    Insecure {
        /// The host.
        host: String,
    },
    /// The request did not complete.
    #[error("cannot reach {url}: {why}")]
    Transport {
        /// The URL.
        url: String,
        /// The transport error.
        why: String,
    },
    /// A sync server's `403 revoked`: this machine's sync key was rotated out of its group;
    /// when (the server's time, ms) and the rotating machine's notice, if it gave one
    /// ([`crate::home_sync::notice`]).
    #[error(
        "{url} answered 403: this machine's sync key was rotated out of its group: get the new \
         phrase from a machine that has it (`freecode sync key`) and run `freecode sync join` \
         with it"
    )]
    RotatedOut {
        /// The URL asked.
        url: String,
        /// When the key was rotated out.
        at: Option<u64>,
        /// The rotating machine's notice.
        notice: Option<String>,
    },
    /// The server answered with an error status.
    #[error("{url} answered {status}: {message}")]
    Status {
        /// The URL.
        url: String,
        /// HTTP status.
        status: u16,
        /// The server's error message, if any.
        message: String,
    },
    /// The share does not exist (never did, or was revoked).
    #[error("share not found: {0} (it never existed or was revoked)")]
    NotFound(String),
    /// The share expired.
    #[error("share expired: {0}")]
    Expired(String),
    /// The body passed the size bound.
    #[error("download from {url} is larger than {limit} bytes")]
    TooLarge {
        /// The URL.
        url: String,
        /// The bound.
        limit: u64,
    },
    /// The body is larger than the share server takes: nothing was sent.
    #[error(
        "{}, {}; nothing was sent{}. Ways past it: {ways}",
        if *estimated {
            format!("the share would be at least {size} bytes (its files, compressed)")
        } else {
            format!("the share is {size} bytes (compressed and encrypted)")
        },
        limit.map_or_else(
            || format!("and {endpoint} refused it as too large (413)"),
            |l| format!("more than the {l} bytes {endpoint} accepts (its maxBodyBytes)")
        ),
        if *estimated { " or even built" } else { "" }
    )]
    ServerLimit {
        /// The server.
        endpoint: String,
        /// The body's size, bytes (at least, when `estimated`).
        size: u64,
        /// Found from the session's files before any bundle was built: `size` is a lower
        /// estimate.
        estimated: bool,
        /// The server's limit, when it told.
        limit: Option<u64>,
        /// What the user can do.
        ways: String,
    },
    /// An encrypted share fetched without its key.
    #[error(
        "the share is encrypted but the URL has no key: use the whole URL, including the part after '#'"
    )]
    MissingKey,
    /// Decryption failed.
    #[error(transparent)]
    Crypto(#[from] CryptoError),
    /// The body is not an importable session.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// The server's answer was not what the protocol says.
    #[error("unexpected answer from {url}: {why}")]
    Protocol {
        /// The URL.
        url: String,
        /// What was wrong.
        why: String,
    },
    /// No server given (`--to`) and none configured (`syncEndpoint`): nothing was contacted.
    #[error(
        "no share server configured, so nothing was sent: pass --to URL for this export, \
         --file [PATH] to write the bundle locally instead, or set syncEndpoint in {config} \
         (`freecode config set syncEndpoint https://…`)"
    )]
    NoEndpoint {
        /// The `config.json` that names none.
        config: String,
    },
    /// The local share log (or `config.json`) failed.
    #[error(transparent)]
    Store(#[from] freecode_store::StoreError),
    /// The session could not be exported.
    #[error(transparent)]
    Export(#[from] freecode_store::share::ShareError),
}

/// A share URL taken apart: `<base>/<code>#<key>`.
#[derive(Debug, Clone)]
pub struct ShareUrl {
    /// The URL without its fragment: what is sent over the wire.
    pub url: String,
    /// The last path segment.
    pub code: String,
    /// The key from the fragment, if present.
    pub key: Option<ShareKey>,
}

impl ShareUrl {
    /// Parses and checks the transport rule; a fragment that is present must be a valid key.
    pub fn parse(s: &str) -> Result<Self, ClientError> {
        let (url, fragment) = match s.split_once('#') {
            Some((u, f)) => (u, Some(f)),
            None => (s, None),
        };
        check_transport(url)?;
        let code = url
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_owned();
        let key = match fragment {
            Some(f) if !f.is_empty() => Some(ShareKey::from_fragment(f)?),
            _ => None,
        };
        Ok(Self {
            url: url.to_owned(),
            code,
            key,
        })
    }
}

/// Refuses anything but `https://`, or `http://` to a loopback host.
pub fn check_transport(url: &str) -> Result<(), ClientError> {
    let bad = |why| ClientError::BadUrl {
        url: url.to_owned(),
        why,
    };
    let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(()),
        "http" if is_loopback(host) => Ok(()),
        "http" => Err(ClientError::Insecure {
            host: host.to_owned(),
        }),
        _ => Err(bad("only https:// (or http:// to loopback) is supported")),
    }
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// What the server returned for an upload.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The share URL, without a key.
    pub url: String,
    /// When it expires, ms.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// The token that revokes it, if the server issues one.
    #[serde(default)]
    pub delete_token: Option<String>,
}

/// A share made: the URL to hand out (with the key) and the server's receipt.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The URL to hand out: the server's URL plus `#<key>` when encrypted.
    pub url: String,
    /// What the server returned.
    pub receipt: Receipt,
    /// Whether the body was encrypted.
    pub encrypted: bool,
}

/// A blocking share client.
#[derive(Debug, Clone)]
pub struct Client {
    agent: ureq::Agent,
    api_key: Option<String>,
    max_download: u64,
    server_limit: Option<u64>,
}

/// What `GET /limits` answers.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ServerLimits {
    max_body_bytes: u64,
}

impl Client {
    /// A client sending `api_key` as a bearer token on uploads, if given.
    pub fn new(api_key: Option<String>) -> Self {
        Self::with_timeout(api_key, TIMEOUT)
    }

    /// Like [`Client::new`] with another overall timeout per request.
    pub fn with_timeout(api_key: Option<String>, timeout: Duration) -> Self {
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .timeout_global(Some(timeout))
                .http_status_as_error(false)
                // A redirect could lead to plain HTTP or another host: the transport rule is
                // checked on the URL we were given, so redirects are not followed.
                .max_redirects(0)
                .build(),
        );
        Self {
            agent,
            api_key: api_key.filter(|k| !k.is_empty()),
            max_download: freecode_store::codec::max_encoded_bytes(
                freecode_store::codec::max_bundle_bytes(),
            ),
            server_limit: None,
        }
    }

    /// Sets the largest upload the server takes (as [`Client::server_limit`] learned it):
    /// [`Client::share`] refuses a larger body without sending it.
    pub fn upload_limit(mut self, bytes: Option<u64>) -> Self {
        self.server_limit = bytes;
        self
    }

    /// The largest upload the server at `endpoint` takes (`GET <endpoint>/limits`,
    /// `{"maxBodyBytes": N}`), or `None` from a server that does not say (an older one, or
    /// the original's). A server that cannot be reached is an error, so nothing is built for it.
    pub fn server_limit(&self, endpoint: &str) -> Result<Option<u64>, ClientError> {
        let url = format!("{}/limits", endpoint.trim_end_matches('/'));
        check_transport(&url)?;
        let mut resp = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| transport(&url, e))?;
        let status = resp.status().as_u16();
        let bytes = read_limited(&mut resp, &url, 64 * 1024)?;
        if status != 200 {
            tracing::debug!(status, "{url} gives no limits; the upload will find out");
            return Ok(None);
        }
        Ok(serde_json::from_slice::<ServerLimits>(&bytes)
            .ok()
            .map(|l| l.max_body_bytes))
    }

    /// Sets the download bound.
    pub fn max_download(mut self, bytes: u64) -> Self {
        self.max_download = bytes;
        self
    }

    /// Uploads `bundle` to `endpoint` (`POST <endpoint>/upload`): encrypted unless `plain`.
    pub fn share(
        &self,
        endpoint: &str,
        bundle: &Bundle,
        plain: bool,
        expires_in: Option<Duration>,
    ) -> Result<Shared, ClientError> {
        let upload = format!("{}/upload", endpoint.trim_end_matches('/'));
        check_transport(&upload)?;
        if plain {
            // The seed's body: {meta, messages}, uncompressed JSON (what such a server reads),
            // with `metadata`, the copy the original's `import(url)` reads.
            let body = serde_json::json!({
                "meta": bundle.meta,
                "metadata": bundle.meta,
                "messages": bundle.messages,
            });
            let bytes = serde_json::to_vec(&body).unwrap_or_default();
            freecode_store::share::check_json(bundle, &bytes)?;
            self.check_limit(endpoint, bundle, bytes.len() as u64)?;
            let receipt = self
                .upload(&upload, &bytes, "application/json", expires_in)
                .map_err(|e| self.too_large(e, endpoint, bundle, bytes.len() as u64))?;
            return Ok(Shared {
                url: receipt.url.clone(),
                receipt,
                encrypted: false,
            });
        }
        let json = freecode_store::share::bundle_json(bundle)?;
        let compressed = freecode_store::codec::compress(&json)
            .map_err(freecode_store::share::ShareError::from)?;
        drop(json);
        let key = ShareKey::generate()?;
        let sealed = crypto::seal(&key, &compressed)?;
        drop(compressed);
        self.check_limit(endpoint, bundle, sealed.len() as u64)?;
        let receipt = self
            .upload(&upload, &sealed, "application/octet-stream", expires_in)
            .map_err(|e| self.too_large(e, endpoint, bundle, sealed.len() as u64))?;
        Ok(Shared {
            url: format!("{}#{}", receipt.url, key.to_fragment()),
            receipt,
            encrypted: true,
        })
    }

    /// Refuses a body past the server's known limit.
    fn check_limit(&self, endpoint: &str, bundle: &Bundle, size: u64) -> Result<(), ClientError> {
        match self.server_limit {
            Some(limit) if size > limit => Err(self.limit_error(endpoint, bundle, size)),
            _ => Ok(()),
        }
    }

    /// [`ClientError::ServerLimit`] for a body of `size` bytes made of `bundle`.
    fn limit_error(&self, endpoint: &str, bundle: &Bundle, size: u64) -> ClientError {
        self.limit_error_of(
            endpoint,
            &bundle.meta.id,
            bundle.rollout.is_some(),
            bundle.memories.is_some(),
            size,
        )
    }

    /// [`ClientError::ServerLimit`] for a body of `size` bytes of session `id`, with or without
    /// its rollout log and memories.
    fn limit_error_of(
        &self,
        endpoint: &str,
        id: &str,
        rollout: bool,
        memories: bool,
        size: u64,
    ) -> ClientError {
        let mut ways = vec![format!(
            "write it to a file instead (freecode session export {id} --file {id}.json.zst) and \
             import that (freecode session import {id}.json.zst)"
        )];
        if rollout {
            ways.push("leave out --include-rollout".to_owned());
        }
        if memories {
            ways.push("leave out --include-memories".to_owned());
        }
        ways.push(
            "or have the server's operator raise its limit (freecode sync serve --max-body BYTES)"
                .to_owned(),
        );
        ClientError::ServerLimit {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            size,
            estimated: false,
            limit: self.server_limit,
            ways: ways.join("; "),
        }
    }

    /// A 413 from a server that did not tell its limit beforehand, as [`ClientError::ServerLimit`].
    fn too_large(&self, e: ClientError, endpoint: &str, bundle: &Bundle, size: u64) -> ClientError {
        match e {
            ClientError::Status { status: 413, .. } => self.limit_error(endpoint, bundle, size),
            e => e,
        }
    }

    fn upload(
        &self,
        url: &str,
        body: &[u8],
        content_type: &str,
        expires_in: Option<Duration>,
    ) -> Result<Receipt, ClientError> {
        // `Expect: 100-continue` lets the server refuse (401, 413) before the body is sent, so
        // the answer is its status, not a broken pipe.
        let mut req = self
            .agent
            .post(url)
            .header("Content-Type", content_type)
            .header("Expect", "100-continue");
        if let Some(k) = &self.api_key {
            req = req.header("Authorization", &format!("Bearer {k}"));
        }
        if let Some(d) = expires_in {
            req = req.header("x-freecode-expires-in", &d.as_secs().max(1).to_string());
        }
        let mut resp = req.send(body).map_err(|e| transport(url, e))?;
        let status = resp.status().as_u16();
        let bytes = read_limited(&mut resp, url, 1024 * 1024)?;
        if !(200..300).contains(&status) {
            return Err(status_error(url, status, &bytes));
        }
        let receipt: Receipt =
            serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol {
                url: url.to_owned(),
                why: format!("upload answer is not {{url, expiresAt}}: {e}"),
            })?;
        check_transport(&receipt.url).map_err(|_| ClientError::Protocol {
            url: url.to_owned(),
            why: format!(
                "the server returned an unusable share URL {:?}",
                receipt.url
            ),
        })?;
        Ok(receipt)
    }

    /// Downloads a share and returns the validated bundle and the shape it came in.
    pub fn fetch(&self, share_url: &str) -> Result<(Bundle, SourceShape), ClientError> {
        let share = ShareUrl::parse(share_url)?;
        let mut resp = self
            .agent
            .get(&share.url)
            .call()
            .map_err(|e| transport(&share.url, e))?;
        let status = resp.status().as_u16();
        let bytes = read_limited(&mut resp, &share.url, self.max_download)?;
        match status {
            200..=299 => {}
            404 => return Err(ClientError::NotFound(share.url)),
            410 => return Err(ClientError::Expired(share.url)),
            _ => return Err(status_error(&share.url, status, &bytes)),
        }
        decode_body(&bytes, share.key.as_ref())
    }

    /// Revokes a share with its delete token (`DELETE <url>`).
    pub fn revoke(&self, share_url: &str, delete_token: &str) -> Result<(), ClientError> {
        let share = ShareUrl::parse(share_url)?;
        let mut resp = self
            .agent
            .delete(&share.url)
            .header("x-freecode-delete-token", delete_token)
            .call()
            .map_err(|e| transport(&share.url, e))?;
        let status = resp.status().as_u16();
        let bytes = read_limited(&mut resp, &share.url, 64 * 1024)?;
        match status {
            200..=299 => Ok(()),
            404 | 410 => Err(ClientError::NotFound(share.url)),
            _ => Err(status_error(&share.url, status, &bytes)),
        }
    }
}

/// Turns downloaded bytes into a bundle: decrypts an envelope with `key`, or parses plain JSON.
/// With a key, only an envelope is accepted: a server cannot swap an encrypted share for a
/// plain body of its own.
pub fn decode_body(
    bytes: &[u8],
    key: Option<&ShareKey>,
) -> Result<(Bundle, SourceShape), ClientError> {
    if key.is_some() && !crypto::is_envelope(bytes) {
        return Err(ClientError::Crypto(CryptoError::NotAnEnvelope(
            "the URL carries a key but the server sent unencrypted data",
        )));
    }
    let limit = freecode_store::codec::max_bundle_bytes();
    let inflate = |z: &[u8]| {
        freecode_store::codec::decompress(z, limit).map_err(freecode_store::share::ShareError::from)
    };
    if crypto::is_envelope(bytes) {
        let key = key.ok_or(ClientError::MissingKey)?;
        let (version, plain) = crypto::open_versioned(key, bytes)?;
        let json = if version == crypto::VERSION_UNCOMPRESSED {
            plain
        } else {
            inflate(&plain)?
        };
        return parse_within(&json, limit);
    }
    // A compressed file (`--file F.zst`), recognised by its magic number whatever its name.
    if freecode_store::codec::is_compressed(bytes) {
        let json = inflate(bytes)?;
        return parse_within(&json, limit);
    }
    // A file's trailing newline is not part of the bundle (export counts without it).
    parse_within(bytes.trim_ascii_end(), limit)
}

/// The byte limit export applies, then the parse (which bounds the number of JSON values
/// itself: counting them here too would scan up to the limit twice).
fn parse_within(json: &[u8], limit: u64) -> Result<(Bundle, SourceShape), ClientError> {
    let size = json.len() as u64;
    if size > limit {
        return Err(BundleError::TooBig { size, max: limit }.into());
    }
    Ok(parse_bundle(json)?)
}

pub(crate) fn read_limited(
    resp: &mut ureq::http::Response<ureq::Body>,
    url: &str,
    limit: u64,
) -> Result<Vec<u8>, ClientError> {
    if let Some(len) = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        && len > limit
    {
        return Err(ClientError::TooLarge {
            url: url.to_owned(),
            limit,
        });
    }
    resp.body_mut()
        .with_config()
        .limit(limit)
        .read_to_vec()
        .map_err(|e| match e {
            ureq::Error::BodyExceedsLimit(_) => ClientError::TooLarge {
                url: url.to_owned(),
                limit,
            },
            e => transport(url, e),
        })
}

pub(crate) fn transport(url: &str, e: ureq::Error) -> ClientError {
    ClientError::Transport {
        url: url.to_owned(),
        why: e.to_string(),
    }
}

pub(crate) fn status_error(url: &str, status: u16, body: &[u8]) -> ClientError {
    if status == 403
        && let Ok(v) = serde_json::from_slice::<serde_json::Value>(body)
        && v.get("code").and_then(serde_json::Value::as_str) == Some("revoked")
    {
        return ClientError::RotatedOut {
            url: url.to_owned(),
            at: v.get("rotatedAt").and_then(serde_json::Value::as_u64),
            notice: v
                .get("notice")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned),
        };
    }
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    ClientError::Status {
        url: url.to_owned(),
        status,
        message,
    }
}

/// The sync settings of `config.json`: `syncEndpoint`, `syncApiKey`, `syncUrlExpiryDays`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncConfig {
    /// Where shares go; `None` when `config.json` names no server.
    pub endpoint: Option<String>,
    /// Bearer token for uploads.
    pub api_key: Option<String>,
    /// Default share lifetime.
    pub expiry_days: u64,
    /// The `config.json` read (named when no endpoint is configured).
    pub file: std::path::PathBuf,
}

impl SyncConfig {
    /// Reads `config.json`; a missing file or empty values give the defaults (no endpoint,
    /// no key, [`DEFAULT_EXPIRY_DAYS`]); a file that does not parse is an error naming its line
    /// and column.
    pub fn load(home: &Home) -> Result<Self, freecode_store::StoreError> {
        let v = home.read_config()?;
        let s = |k: &str| {
            v.get(k)
                .and_then(|x| x.as_str())
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(str::to_owned)
        };
        Ok(Self {
            endpoint: s("syncEndpoint"),
            api_key: s("syncApiKey"),
            expiry_days: v
                .get("syncUrlExpiryDays")
                .and_then(serde_json::Value::as_u64)
                .filter(|d| *d > 0)
                .unwrap_or(DEFAULT_EXPIRY_DAYS),
            file: home.config_file(),
        })
    }

    /// The server to use: `to` (a `--to` flag), else `syncEndpoint`, else
    /// [`ClientError::NoEndpoint`] explaining the choices.
    pub fn endpoint_or(&self, to: Option<&str>) -> Result<String, ClientError> {
        to.map(str::to_owned)
            .or_else(|| self.endpoint.clone())
            .ok_or_else(|| ClientError::NoEndpoint {
                config: self.file.display().to_string(),
            })
    }

    /// The share lifetime: `requested`, else `syncUrlExpiryDays`.
    pub fn lifetime(&self, requested: Option<Duration>) -> Duration {
        requested.unwrap_or(Duration::from_secs(self.expiry_days.saturating_mul(86_400)))
    }
}

/// `now` plus `lifetime`, in ms (saturating).
pub fn expires_at(now: i64, lifetime: Duration) -> i64 {
    now.saturating_add(i64::try_from(lifetime.as_millis()).unwrap_or(i64::MAX))
}

/// What [`share_session`] shares, and how.
#[derive(Debug, Clone, Default)]
pub struct ShareOptions {
    /// The server [default: `syncEndpoint`].
    pub to: Option<String>,
    /// Send the seed's plain `{meta, messages}` instead of an encrypted bundle.
    pub plain: bool,
    /// The lifetime [default: `syncUrlExpiryDays`].
    pub expires_in: Option<Duration>,
    /// Include the rollout log.
    pub include_rollout: bool,
    /// Include the project's memory entries.
    pub include_memories: bool,
}

/// A session shared by [`share_session`].
#[derive(Debug)]
pub struct SessionShare {
    /// The URL to hand out and the server's receipt.
    pub shared: Shared,
    /// What was sent (redacted), before encryption.
    pub bundle: Bundle,
    /// Whether `shares.jsonl` recorded it. On `Err` the share is live anyway: the caller must
    /// hand out the URL and the delete token, the only way left to revoke it.
    pub logged: Result<(), ClientError>,
}

/// The whole of `session export` / `session.export`: export the session (redacted), encrypt
/// unless `plain`, upload to the configured or given server with the configured API key, and
/// record the share with its delete token in `shares.jsonl`.
pub fn share_session(
    store: &freecode_store::SessionStore,
    id: &freecode_core::SessionId,
    opts: &ShareOptions,
) -> Result<SessionShare, ClientError> {
    let config = SyncConfig::load(store.home())?;
    // Decided before anything is exported or contacted.
    let endpoint = config.endpoint_or(opts.to.as_deref())?;
    let lifetime = config.lifetime(opts.expires_in);
    let now = freecode_store::now_ms();
    // The server's limit, before the bundle is built: an unreachable server costs no export,
    // and a bundle too large for it is refused before it is sent.
    let client = Client::new(config.api_key);
    let limit = client.server_limit(&endpoint)?;
    let client = client.upload_limit(limit);
    // A session whose files alone make a body past the limit is refused now, without reading
    // it into a bundle (the parse, the redaction walk and the copies are what cost).
    if let Some(limit) = limit
        && let Some(size) = body_past(store, id, opts, limit)?
    {
        let mut e = client.limit_error_of(
            &endpoint,
            id.as_str(),
            opts.include_rollout,
            opts.include_memories,
            size,
        );
        if let ClientError::ServerLimit { estimated, .. } = &mut e {
            *estimated = true;
        }
        return Err(e);
    }
    let bundle = freecode_store::share::export_bundle(
        store,
        id,
        &freecode_store::share::ExportOptions {
            include_rollout: opts.include_rollout,
            include_memories: opts.include_memories,
            no_redact: false,
            expires_at: Some(expires_at(now, lifetime)),
        },
    )?;
    let shared = client.share(&endpoint, &bundle, opts.plain, Some(lifetime))?;
    let logged = ShareLog::new(store.home()).add(&ShareRecord {
        url: shared.url.clone(),
        session_id: id.to_string(),
        title: bundle.meta.title.clone(),
        created_at: now,
        expires_at: shared.receipt.expires_at,
        delete_token: shared.receipt.delete_token.clone(),
        encrypted: shared.encrypted,
        revoked_at: None,
    });
    Ok(SessionShare {
        shared,
        bundle,
        logged,
    })
}

/// Margin over a server's limit before the early check refuses: the body is estimated from the
/// files (compressed in blocks, as the bundle will be whole), and only an estimate this far
/// past the limit is sure to be too large; anything closer is built and measured exactly.
const EARLY_REFUSAL_MARGIN: u64 = 8; // a limit plus 1/8

/// Blocks the files are compressed in for the estimate: past zstd's window at the codec's
/// level, so a block loses next to nothing to the ones before it.
const ESTIMATE_BLOCK: usize = 8 << 20;

/// What the body of session `id` will be at least, from its files — `meta.json`,
/// `messages.jsonl` and, with `--include-rollout`, its log — read in blocks, never whole:
/// their size for a plain body, their compressed size otherwise, counted only until it passes
/// `limit` by the margin. `Some(size)` when it does (the share is too large for sure), `None`
/// when the real body has to be measured.
fn body_past(
    store: &freecode_store::SessionStore,
    id: &freecode_core::SessionId,
    opts: &ShareOptions,
    limit: u64,
) -> Result<Option<u64>, ClientError> {
    use std::io::Read;
    let past = limit.saturating_add(limit / EARLY_REFUSAL_MARGIN);
    let paths = store
        .locate(id)
        .map_err(freecode_store::share::ShareError::from)?;
    let mut files = vec![paths.meta(), paths.messages()];
    if opts.include_rollout {
        files.push(freecode_store::rollout::events_path(store.home(), id));
    }
    let io = |path: &std::path::Path, e: std::io::Error| {
        ClientError::from(freecode_store::share::ShareError::from(
            freecode_store::StoreError::Io {
                op: "read",
                path: path.to_owned(),
                source: e,
            },
        ))
    };
    let mut size = 0u64;
    let mut block = Vec::with_capacity(ESTIMATE_BLOCK);
    for path in files {
        let file = match freecode_store::fsutil::open_read(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path, e)),
        };
        let mut file = file;
        loop {
            block.clear();
            let n = (&mut file)
                .take(ESTIMATE_BLOCK as u64)
                .read_to_end(&mut block)
                .map_err(|e| io(&path, e))?;
            if n == 0 {
                break;
            }
            size += if opts.plain {
                n as u64
            } else {
                freecode_store::codec::compress(&block)
                    .map_err(freecode_store::share::ShareError::from)?
                    .len() as u64
            };
            if size > past {
                return Ok(Some(size));
            }
        }
    }
    Ok(None)
}

/// One share made from this home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShareRecord {
    /// The full URL handed out (with the key, when encrypted).
    pub url: String,
    /// The session it was made from.
    pub session_id: String,
    /// The session's title then.
    #[serde(default)]
    pub title: String,
    /// When it was made, ms.
    pub created_at: i64,
    /// When it expires, ms.
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// The revocation token.
    #[serde(default)]
    pub delete_token: Option<String>,
    /// Whether it is encrypted.
    pub encrypted: bool,
    /// When it was revoked, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<i64>,
}

impl ShareRecord {
    /// The URL without its key.
    pub fn public_url(&self) -> &str {
        self.url.split('#').next().unwrap_or(&self.url)
    }
}

/// `shares.jsonl`: the shares made from this home, append-only (0600). Each line is a
/// [`ShareRecord`] or a revocation `{"revokedUrl", "revokedAt"}`; every change is one `write`
/// of one line, so concurrent exports never lose each other's delete tokens, and a torn or bad
/// line is skipped (and logged), never fatal.
#[derive(Debug)]
pub struct ShareLog {
    path: PathBuf,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Revocation {
    revoked_url: String,
    revoked_at: i64,
}

impl ShareLog {
    /// The log of `home`.
    pub fn new(home: &Home) -> Self {
        Self {
            path: home.root().join("shares.jsonl"),
        }
    }

    /// Where the log lives.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Every record, oldest first, with revocations applied. Bad or torn lines are skipped
    /// and logged.
    pub fn list(&self) -> Result<Vec<ShareRecord>, ClientError> {
        let file = match freecode_store::fsutil::open_read(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(self.io_error("read", source)),
        };
        let mut records: Vec<ShareRecord> = Vec::new();
        freecode_store::jsonl::stream::<LogLine, _>(
            file,
            |line| match line {
                LogLine::Record(r) => records.push(r),
                LogLine::Revocation(rv) => {
                    for r in records
                        .iter_mut()
                        .filter(|r| r.public_url() == rv.revoked_url)
                    {
                        r.revoked_at = Some(rv.revoked_at);
                    }
                }
            },
            |issue| tracing::warn!(path = %self.path.display(), "skipped {issue}"),
        )
        .map_err(|source| self.io_error("read", source))?;
        Ok(records)
    }

    /// Adds a record.
    pub fn add(&self, record: &ShareRecord) -> Result<(), ClientError> {
        self.append(&serde_json::to_vec(record).unwrap_or_default())
    }

    /// Marks the records with `public_url` revoked; `false` when there is none.
    pub fn mark_revoked(&self, public_url: &str, at: i64) -> Result<bool, ClientError> {
        if !self.list()?.iter().any(|r| r.public_url() == public_url) {
            return Ok(false);
        }
        let line = serde_json::to_vec(&Revocation {
            revoked_url: public_url.to_owned(),
            revoked_at: at,
        })
        .unwrap_or_default();
        self.append(&line)?;
        Ok(true)
    }

    fn append(&self, line: &[u8]) -> Result<(), ClientError> {
        if let Some(dir) = self.path.parent() {
            freecode_store::fsutil::create_dir_private(dir)?;
        }
        Ok(freecode_store::fsutil::append_line(&self.path, line)?)
    }

    fn io_error(&self, op: &'static str, source: std::io::Error) -> ClientError {
        freecode_store::StoreError::Io {
            op,
            path: self.path.clone(),
            source,
        }
        .into()
    }
}

/// A line of `shares.jsonl`.
#[derive(Deserialize)]
#[serde(untagged)]
enum LogLine {
    Record(ShareRecord),
    Revocation(Revocation),
}

#[cfg(test)]
mod tests;
