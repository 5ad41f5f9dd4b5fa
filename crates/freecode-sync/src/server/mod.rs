//! The share server (`freecode sync serve`): stores opaque, expiring, revocable bundles.
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
//!
//! Codes are 128 random bits (32 lowercase hex); delete tokens 256 bits, stored only as their
//! SHA-256. The server holds no state: blobs and records live in the [`crate::blob`] store
//! (see its layout), and a sweeper task on every replica removes expired shares, so replicas
//! over one directory or bucket behave as one server.

mod handlers;
mod record;
mod sweep;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

pub use handlers::{DELETE_TOKEN_HEADER, EXPIRES_AT_HEADER, EXPIRES_IN_HEADER};

use crate::blob::{BlobError, BlobStore, StoreSpec};
use handlers::App;

/// Share server settings. `Default` is a loopback server over `./freecode-shares`.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Address to listen on (port 0 picks a free one).
    pub listen: SocketAddr,
    /// Where blobs and records live.
    pub store: StoreSpec,
    /// When set, uploads need `Authorization: Bearer <api_key>`.
    pub api_key: Option<String>,
    /// Base of the URLs handed out (e.g. `https://share.example.com`); default
    /// `http://<Host header>`.
    pub public_url: Option<String>,
    /// Largest accepted upload, in bytes.
    pub max_body: usize,
    /// Lifetime of a share whose upload asks for none.
    pub default_ttl: Duration,
    /// Longest lifetime an upload may ask for.
    pub max_ttl: Duration,
    /// How often the sweeper looks for expired shares.
    pub sweep_interval: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            store: StoreSpec::File(PathBuf::from("freecode-shares")),
            api_key: None,
            public_url: None,
            max_body: 16 * 1024 * 1024,
            default_ttl: Duration::from_secs(7 * 24 * 3600),
            max_ttl: Duration::from_secs(30 * 24 * 3600),
            sweep_interval: Duration::from_secs(60),
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
    #[error("binding {addr}: {source}")]
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
    /// Serving failed.
    #[error("serving on {addr}: {source}")]
    Serve {
        /// The listening address.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: std::io::Error,
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
        if let Some(url) = &self.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(ServerError::Config(format!(
                "public_url {url:?} must start with http:// or https://"
            )));
        }
        Ok(())
    }

    fn open_store(&self) -> Result<BlobStore, ServerError> {
        BlobStore::open(&self.store).map_err(|source| ServerError::Store {
            store: self.store.to_string(),
            source: Box::new(source),
        })
    }
}

/// Binds `config.listen`, opens the store, logs the address, and serves until `shutdown`
/// completes; then finishes in-flight requests and returns.
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
    });
    let router = Router::new()
        .route("/upload", post(handlers::upload))
        .route("/healthz", get(handlers::health))
        .route("/{code}", get(handlers::download).delete(handlers::revoke))
        .fallback(handlers::fallback)
        .layer(DefaultBodyLimit::max(config.max_body))
        .layer(axum::middleware::from_fn(handlers::log_request))
        .with_state(app);

    let sweeper = tokio::spawn(sweep::Sweeper::default().run(store, config.sweep_interval));
    tracing::info!(
        %addr,
        store = %config.store,
        max_body = config.max_body,
        sweep_interval_s = config.sweep_interval.as_secs_f64(),
        auth = config.api_key.is_some(),
        "share server listening"
    );
    let served = axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await;
    sweeper.abort();
    tracing::info!(%addr, "share server stopped");
    served.map_err(|source| ServerError::Serve { addr, source })
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
            tracing::warn!(addr = %self.addr, %error, "share server ended with an error");
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
