//! The server (`freecode sync serve`): stores opaque, expiring, revocable shares, and home
//! sync's sealed records for each group of machines.
//!
//! | part | module |
//! |---|---|
//! | settings, start and stop, the routes, the state every handler reads ([`App`]), the responses they share | this module |
//! | every rule a request meets (admission, API key, group credential, group quota) | [`rules`] |
//! | the share endpoints (`/upload`, `/{code}`) and a share's record | [`share`], [`record`] |
//! | home sync's endpoints (`/sync/v1/…`) | [`home_sync`] |
//! | `/healthz`, `/limits`, the request log | [`service`] |
//! | expired shares removed | [`sweep`] |
//!
//! HTTP API (JSON responses; errors are `{"error": "..."}`):
//!
//! - `POST /upload` — body: the bundle (any bytes; its `Content-Type` is kept). Optional
//!   `x-freecode-expires-in: <seconds>` (default [`ServerConfig::default_ttl`], clamped to
//!   `1 s ..= max_ttl`; not an integer → 400). With an API key configured,
//!   `Authorization: Bearer <key>` is required (401). Empty → 400; over `max_body` → 413.
//!   `201 {"url", "code", "expiresAt" (ms since epoch), "deleteToken"}`.
//! - `GET /{code}` — 200 with the bytes and their Content-Type, `Cache-Control: no-store` and
//!   `x-freecode-expires-at`; 404 unknown or malformed; 410 expired (removed on the spot).
//! - `DELETE /{code}` with `x-freecode-delete-token` — 204; 403 wrong or missing token; 404.
//! - `GET /healthz` — `200 {"status":"ok"}` when the store answers, else 503.
//! - `GET /limits` — `200 {"maxBodyBytes": N}`: the largest upload taken, for clients to check
//!   before they build or send one (413 names the limit too).
//! - `/sync/v1/…` — home sync: sealed records and claims ([`home_sync`]), each group's behind
//!   its own credential ([`rules::group`]).
//!
//! Any request but `/healthz` waits up to 2 s for one of [`ServerConfig::max_concurrent`]
//! slots, else `503 {"error": "server busy"}` with `Retry-After: 1`; a request not answered
//! within [`ServerConfig::request_timeout`] (a slow or stalled body included) gets
//! `408 {"error": "request timed out"}`, one whose body has not fully arrived within
//! [`ServerConfig::body_timeout`] gets `408 {"error": "request body timed out"}`, and either
//! way its connection is closed.
//!
//! Connections (HTTP/1.1, keep-alive) are bounded too: a request head must arrive in full
//! within [`ServerConfig::header_timeout`] of the accept (or of its first byte, on a reused
//! connection), a keep-alive connection idle for [`ServerConfig::idle_timeout`] is closed, and
//! so is one whose client stops reading a response for as long. At most
//! [`ServerConfig::max_connections`] are open, [`ServerConfig::max_connections_per_ip`] per
//! client address; a new connection past a cap evicts the oldest one that has no request in
//! the handlers (a silent or trickling socket), and is closed at once only when all in its
//! way are busy — so idle sockets never starve `/healthz`. Closed connections are logged
//! with the peer address.
//!
//! Share URLs are `<public_url>/<code>`. Without a public URL they are `http://<Host>`, which
//! clients accept only for loopback hosts: the server then refuses to listen on anything but
//! loopback, and refuses (before storing anything) uploads that came through a proxy or name
//! a non-loopback Host.
//!
//! Codes are 128 random bits (32 lowercase hex); delete tokens 256 bits, stored only as their
//! SHA-256. Logs never carry a whole code: store errors have the codes in their paths and keys
//! shortened.
//!
//! # State
//!
//! What must hold across replicas lives in the [`crate::blob`] store (see its layout): shares
//! and their records, each group's credential and objects. A sweeper task on every replica
//! removes expired shares, so replicas over one directory or bucket serve the same shares and
//! the same groups. Each replica also keeps, in memory and for itself alone ([`App`]):
//!
//! - which group each credential hash names (`creds/` objects never change, so this is a cache
//!   that cannot go stale; [`rules::group`]);
//! - each group's request bucket and counted usage ([`rules::quota`]): N replicas admit up to
//!   N times a group's request rate, and see what the others stored at their next listing;
//! - each group's last status listing, for [`SYNC_STATUS_TTL`];
//! - its admission slots ([`rules::admission`]).
//!
//! A replica restarted starts these again from the store.

mod home_sync;
mod record;
mod redact;
mod rules;
mod service;
mod share;
mod sweep;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;

use axum::routing::{get, post};
use freecode_http::ConnLimits;

pub use home_sync::STATUS_TTL as SYNC_STATUS_TTL;
pub use rules::group::CREDENTIAL_HEADER as SYNC_CREDENTIAL_HEADER;
pub use rules::quota::{GroupLimits, USAGE_TTL as SYNC_USAGE_TTL};
pub use rules::strangers::StrangerLimits;
pub use share::{DELETE_TOKEN_HEADER, EXPIRES_AT_HEADER, EXPIRES_IN_HEADER};

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::blob::{BlobError, BlobStore, StoreSpec};

/// Everything a handler needs: the configuration, and what this replica keeps in memory (see
/// "State" above).
#[derive(Debug)]
pub(crate) struct App {
    pub store: BlobStore,
    pub api_key: Option<String>,
    pub public_url: Option<String>,
    pub local_addr: SocketAddr,
    pub max_body: usize,
    pub default_ttl: Duration,
    pub max_ttl: Duration,
    /// Home sync's last status of each group (its JSON) and when it was listed: see
    /// `home_sync::status`.
    pub sync_status: std::sync::Mutex<
        std::collections::HashMap<String, (std::time::Instant, axum::body::Bytes)>,
    >,
    /// Which group each credential hash names (immutable on the store): see `rules::group`.
    pub sync_creds: rules::group::CredCache,
    /// Each group's request rate and usage: see `rules::quota`.
    pub quotas: rules::quota::Quotas,
    /// What clients the server does not know may spend.
    pub strangers: rules::strangers::Strangers,
    /// Sync writes through this replica (a listing begun before one is not kept).
    pub sync_writes: std::sync::atomic::AtomicU64,
}

/// A JSON error response.
pub(crate) fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let mut response = (status, Json(json!({ "error": message.into() }))).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `413`: a body past this server's limit (`max_body`).
pub(crate) fn too_large(max: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "body larger than {max} bytes, this server's limit (GET /limits tells it \
             beforehand; its operator can raise it with `freecode sync serve --max-body BYTES`)"
        ),
    )
}

/// A home-sync store failure: logged (keys redacted), answered without internals.
pub(crate) fn store_failed(op: &'static str, err: &BlobError) -> Response {
    tracing::error!(op, error = %redact::redacted(err), "sync store request failed");
    error(StatusCode::INTERNAL_SERVER_ERROR, "storage error")
}

/// `404` JSON for anything unrouted.
pub(crate) async fn fallback() -> Response {
    error(StatusCode::NOT_FOUND, "not found")
}

/// Share server settings. `Default` is a loopback server (`127.0.0.1:8787`) over
/// `./freecode-shares`, without API key or public URL, taking bodies up to 16 MiB, shares of
/// 7 days by default and 30 at most, sweeping every minute, serving at most 64 requests at
/// once, each within 60 s (its body within 30 s), with request heads due within 10 s, idle
/// connections closed after 60 s, and at most 512 connections open, 64 per client address.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Where blobs and records live.
    pub store: StoreSpec,
    /// When set, uploads need `Authorization: Bearer <api_key>`.
    pub api_key: Option<String>,
    /// Base of the URLs handed out (e.g. `https://share.example.com`): must be `https://`
    /// unless its host is loopback. Required unless `listen` is a loopback address; without
    /// it, URLs are `http://<Host header>`.
    pub public_url: Option<String>,
    /// Largest accepted upload, in bytes.
    pub max_body: usize,
    /// Lifetime of a share whose upload asks for none.
    pub default_ttl: Duration,
    /// Longest lifetime an upload may ask for.
    pub max_ttl: Duration,
    /// How often the sweeper looks for expired shares.
    pub sweep_interval: Duration,
    /// Most requests handled at once (`/healthz` aside): bounds the memory uploads take to
    /// about `max_concurrent × max_body`. Past it a request waits up to 2 s, then gets 503.
    pub max_concurrent: usize,
    /// Longest a request may take, from getting its slot (body upload included) to its
    /// response; past it, 408.
    pub request_timeout: Duration,
    /// Longest a request's body may take to arrive, from the same moment; past it, 408 and
    /// the connection is closed. Only useful below `request_timeout`.
    pub body_timeout: Duration,
    /// Longest a request head may take to arrive in full, counted from the accept on a new
    /// connection and from its first byte on a reused one; past it the connection is closed
    /// without an answer.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may sit with no request (or a response go unread)
    /// before it is closed.
    pub idle_timeout: Duration,
    /// Most connections open at once. Past it, a new connection evicts the oldest one that
    /// has no request in the handlers, or is closed at once when every one has.
    pub max_connections: usize,
    /// Most connections open at once from one client address, enforced the same way among
    /// that address's connections (at most `max_connections`).
    pub max_connections_per_ip: usize,
    /// What each home-sync group may store and ask (see [`GroupLimits`]).
    pub group_limits: GroupLimits,
    /// What clients the server does not know may spend: new groups, requests with unknown
    /// credentials (see [`StrangerLimits`]).
    pub stranger_limits: StrangerLimits,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let conn = ConnLimits::default();
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            store: StoreSpec::File(PathBuf::from("freecode-shares")),
            api_key: None,
            public_url: None,
            max_body: 16 * 1024 * 1024,
            default_ttl: Duration::from_secs(7 * 24 * 3600),
            max_ttl: Duration::from_secs(30 * 24 * 3600),
            sweep_interval: Duration::from_secs(60),
            max_concurrent: 64,
            request_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            header_timeout: conn.header_timeout,
            idle_timeout: conn.idle_timeout,
            max_connections: conn.max_connections,
            max_connections_per_ip: conn.max_connections_per_ip,
            group_limits: GroupLimits::default(),
            stranger_limits: StrangerLimits::default(),
        }
    }
}

/// Why the server could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A setting is unusable.
    #[error("invalid server config: {0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error("opening store {store}: {source}")]
    Store {
        /// The store spec.
        store: String,
        /// The underlying error.
        #[source]
        source: Box<BlobError>,
    },
    /// The runtime or thread for [`spawn`] could not be started.
    #[error("starting server runtime for {addr}: {source}")]
    Runtime {
        /// The address being served.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The server thread of a [`ServerHandle`] panicked.
    #[error("share server thread for {addr} panicked")]
    Panicked {
        /// The address it served.
        addr: SocketAddr,
    },
}

impl ServerConfig {
    /// Checks the settings that would otherwise fail later (or panic, like a zero interval).
    fn validate(&self) -> Result<(), ServerError> {
        let bad = |m: &str| Err(ServerError::Config(m.to_owned()));
        if self.max_body == 0 {
            return bad("max_body must be at least 1 byte");
        }
        if self.max_ttl < Duration::from_secs(1) {
            return bad("max_ttl must be at least 1 second");
        }
        if self.sweep_interval.is_zero() {
            return bad("sweep_interval must be positive");
        }
        if self.api_key.as_deref().is_some_and(str::is_empty) {
            return bad("api_key must not be empty");
        }
        if self.max_concurrent == 0 || self.max_concurrent > tokio::sync::Semaphore::MAX_PERMITS {
            return Err(ServerError::Config(format!(
                "max_concurrent must be between 1 and {}",
                tokio::sync::Semaphore::MAX_PERMITS
            )));
        }
        for (name, timeout) in [
            ("request_timeout", self.request_timeout),
            ("body_timeout", self.body_timeout),
            ("header_timeout", self.header_timeout),
            ("idle_timeout", self.idle_timeout),
        ] {
            if timeout.is_zero() {
                return Err(ServerError::Config(format!("{name} must be positive")));
            }
        }
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1");
        }
        if self.max_connections_per_ip == 0 {
            return bad("max_connections_per_ip must be at least 1");
        }
        let g = self.group_limits;
        if g.max_bytes == 0 || g.max_objects == 0 || g.requests_per_minute == 0 {
            return bad(
                "each sync group limit (bytes, objects, requests a minute) must be at least 1",
            );
        }
        match &self.public_url {
            Some(url) => check_public_url(url),
            None if !self.listen.ip().to_canonical().is_loopback() => {
                Err(ServerError::Config(format!(
                    "listening on {} needs --public-url https://… (share URLs must be https \
                     except on loopback)",
                    self.listen
                )))
            }
            None => Ok(()),
        }
    }

    fn open_store(&self) -> Result<BlobStore, ServerError> {
        BlobStore::open(&self.store).map_err(|source| ServerError::Store {
            store: self.store.to_string(),
            source: Box::new(source),
        })
    }
}

/// Checks a public URL the way clients check share URLs: `https://`, or `http://` to a
/// loopback host.
fn check_public_url(url: &str) -> Result<(), ServerError> {
    use crate::share::{ClientError, check_transport};
    match check_transport(url) {
        Ok(()) => Ok(()),
        Err(ClientError::Insecure { host }) => Err(ServerError::Config(format!(
            "public_url {url:?} must start with https:// (plain http is allowed only for a \
             loopback host, not {host})"
        ))),
        Err(ClientError::BadUrl { why, .. }) => Err(ServerError::Config(format!(
            "public_url {url:?} is unusable: {why}"
        ))),
        Err(other) => Err(ServerError::Config(format!(
            "public_url {url:?} is unusable: {other}"
        ))),
    }
}

/// Binds `config.listen`, opens the store, logs the address, and serves until `shutdown`
/// completes; then stops accepting, closes idle connections, lets in-flight requests finish
/// for up to [`SHUTDOWN_GRACE`], drops the connections still open, and returns.
pub async fn serve(
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    config.validate()?;
    let store = config.open_store()?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.listen,
            source,
        })?;
    run(listener, store, config, shutdown).await
}

/// How long in-flight requests may still run once shutdown has been asked for.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Serves on an already-bound listener.
async fn run(
    listener: tokio::net::TcpListener,
    store: BlobStore,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let addr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: config.listen,
        source,
    })?;
    let app = Arc::new(App {
        store: store.clone(),
        api_key: config.api_key.clone(),
        public_url: config
            .public_url
            .as_ref()
            .map(|u| u.trim_end_matches('/').to_owned()),
        local_addr: addr,
        max_body: config.max_body,
        default_ttl: config.default_ttl,
        max_ttl: config.max_ttl,
        sync_status: std::sync::Mutex::new(std::collections::HashMap::new()),
        sync_creds: rules::group::CredCache::default(),
        quotas: rules::quota::Quotas::new(config.group_limits),
        strangers: rules::strangers::Strangers::new(config.stranger_limits),
        sync_writes: std::sync::atomic::AtomicU64::new(0),
    });
    let router = Router::new()
        .route("/upload", post(share::upload))
        .route("/healthz", get(service::health))
        .route("/limits", get(service::limits))
        .route("/sync/v1/status", get(home_sync::status))
        .route(
            "/sync/v1/logs/{log}/{host}/{index}",
            axum::routing::put(home_sync::put_record),
        )
        .route(
            "/sync/v1/logs/{log}/{host}",
            get(home_sync::get_records).delete(home_sync::delete_host_log),
        )
        .route(
            "/sync/v1/logs/{log}",
            axum::routing::delete(home_sync::delete_log),
        )
        .route(
            "/sync/v1/claims/{log}/{chain}",
            axum::routing::put(home_sync::put_claim),
        )
        .route(
            "/sync/v1/logs/{log}/{host}/{index}/wrap",
            post(home_sync::rewrap_record),
        )
        .route("/sync/v1/batch", post(home_sync::batch))
        .route(
            "/sync/v1/credential",
            axum::routing::put(rules::group::rotate),
        )
        .route(
            "/sync/v1/rings/{key}",
            axum::routing::put(home_sync::put_ring).get(home_sync::get_ring),
        )
        .route("/{code}", get(share::download).delete(share::revoke))
        .fallback(fallback)
        .layer(axum::middleware::from_fn(rules::strangers::mark_peer))
        .layer(DefaultBodyLimit::max(config.max_body))
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(rules::admission::Limits::new(
                config.max_concurrent,
                config.request_timeout,
                config.body_timeout,
            )),
            rules::admission::limit,
        ))
        .layer(axum::middleware::from_fn(service::log_request))
        .with_state(app);

    let sweeper = tokio::spawn(sweep::Sweeper::default().run(store, config.sweep_interval));
    tracing::info!(
        %addr,
        store = %config.store,
        max_body = config.max_body,
        sweep_interval_s = config.sweep_interval.as_secs_f64(),
        auth = config.api_key.is_some(),
        max_concurrent = config.max_concurrent,
        request_timeout_s = config.request_timeout.as_secs_f64(),
        body_timeout_s = config.body_timeout.as_secs_f64(),
        header_timeout_s = config.header_timeout.as_secs_f64(),
        idle_timeout_s = config.idle_timeout.as_secs_f64(),
        max_connections = config.max_connections,
        max_connections_per_ip = config.max_connections_per_ip,
        group_max_bytes = config.group_limits.max_bytes,
        group_max_objects = config.group_limits.max_objects,
        group_requests_per_minute = config.group_limits.requests_per_minute,
        "share server listening"
    );
    let limits = ConnLimits {
        header_timeout: config.header_timeout,
        idle_timeout: config.idle_timeout,
        max_connections: config.max_connections,
        max_connections_per_ip: config.max_connections_per_ip,
        quiet_unused: false,
    };
    freecode_http::serve(listener, router, limits, SHUTDOWN_GRACE, shutdown).await;
    sweeper.abort();
    tracing::info!(%addr, "share server stopped");
    Ok(())
}

/// A server running on its own thread and tokio runtime, from [`spawn`]. Dropping it (or
/// [`ServerHandle::shutdown`]) stops it gracefully and joins the thread.
#[derive(Debug)]
pub struct ServerHandle {
    /// The bound address (the real port when `listen` had port 0).
    pub addr: SocketAddr,
    /// `http://<addr>`.
    pub url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServerError>>>,
}

impl ServerHandle {
    /// Stops the server gracefully, waits for it, and reports how serving ended.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(thread) => thread
                .join()
                .map_err(|_| ServerError::Panicked { addr: self.addr })?,
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Err(error) = self.stop_and_join() {
            tracing::warn!(
                addr = %self.addr,
                error = %redact::redacted(&error),
                "share server ended with an error"
            );
        }
    }
}

/// Starts a server on a thread of its own: binds and opens the store before returning (so
/// errors surface here, and `listen` may use port 0), then serves until the handle is dropped.
pub fn spawn(config: ServerConfig) -> Result<ServerHandle, ServerError> {
    config.validate()?;
    let listen = config.listen;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("freecode-share")
        .build()
        .map_err(|source| ServerError::Runtime {
            addr: listen,
            source,
        })?;
    let std_listener = std::net::TcpListener::bind(listen)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|source| ServerError::Bind {
            addr: listen,
            source,
        })?;
    let addr = std_listener
        .local_addr()
        .map_err(|source| ServerError::Bind {
            addr: listen,
            source,
        })?;
    // Inside the runtime: the S3 client may want one when it is built.
    let store = runtime.block_on(async { config.open_store() })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("freecode-share-{}", addr.port()))
        .spawn(move || {
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener)
                    .map_err(|source| ServerError::Bind { addr, source })?;
                run(listener, store, config, async move {
                    // A dropped sender means the handle is gone: stop as well.
                    let _ = stopped.await;
                })
                .await
            })
        })
        .map_err(|source| ServerError::Runtime { addr, source })?;
    Ok(ServerHandle {
        addr,
        url: format!("http://{addr}"),
        stop: Some(stop),
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn check(listen: &str, public_url: Option<&str>) -> Result<(), String> {
        ServerConfig {
            listen: listen.parse().unwrap(),
            public_url: public_url.map(str::to_owned),
            ..ServerConfig::default()
        }
        .validate()
        .map_err(|e| e.to_string())
    }

    #[test]
    fn plain_http_urls_only_on_loopback() {
        for listen in [
            "127.0.0.1:0",
            "127.1.2.3:8787",
            "[::1]:0",
            "[::ffff:127.0.0.1]:0",
        ] {
            assert_eq!(check(listen, None), Ok(()), "{listen}");
        }
        for listen in ["0.0.0.0:8787", "[::]:0", "192.168.1.10:80"] {
            let e = check(listen, None).unwrap_err();
            assert!(e.contains(&format!("listening on {listen}")), "{e}");
            assert!(e.contains("--public-url https://"), "{e}");
            assert_eq!(check(listen, Some("https://share.example.com")), Ok(()));
        }
        for url in [
            "https://share.example.com",
            "HTTPS://share.example.com/base/",
            "http://127.0.0.1:8787",
            "http://localhost",
            "http://[::1]:8787/",
        ] {
            assert_eq!(check("0.0.0.0:0", Some(url)), Ok(()), "{url}");
        }
        for url in [
            "http://share.example.com",
            "http://10.0.0.1:8787",
            "ftp://share.example.com",
            "share.example.com",
            "https://",
        ] {
            let e = check("127.0.0.1:0", Some(url)).unwrap_err();
            assert!(e.contains("public_url"), "{url}: {e}");
        }
        let e = check("127.0.0.1:0", Some("http://share.example.com")).unwrap_err();
        assert!(e.contains("must start with https://"), "{e}");
    }

    #[test]
    fn limits_must_be_usable() {
        let zero = ServerConfig {
            max_concurrent: 0,
            ..ServerConfig::default()
        };
        assert!(zero.validate().is_err());
        let instant = ServerConfig {
            request_timeout: Duration::ZERO,
            ..ServerConfig::default()
        };
        assert!(instant.validate().is_err());
        let d = ServerConfig::default();
        assert_eq!(
            (d.max_concurrent, d.request_timeout),
            (64, Duration::from_secs(60))
        );
        assert!(d.validate().is_ok());
    }
}
