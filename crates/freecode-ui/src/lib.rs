//! freecode's local web viewer (`freecode ui`): sessions, search, traces and stats, on loopback
//! only. Every page and every `/api/` answer is one call of [`freecode_ops`], rendered.
//!
//! Private by construction: the listener binds a 127.x address (anything else is refused), every
//! request needs the home's random token (128 bits from the OS; once in the printed URL, then
//! an `HttpOnly; SameSite=Strict` cookie named after the port), its `Host` must be
//! `127.x.y.z:PORT` or `localhost:PORT` (DNS rebinding), and a request another origin made (a foreign `Origin`,
//! `Sec-Fetch-Site` other than `same-origin`/`none`) is refused. Every response carries a
//! Content-Security-Policy without inline script ([`CSP`]). Pages are [`maud`] templates
//! ([`pages`]) that escape everything from a session; the JSON endpoints under `/api/` answer
//! the types of the CLI's `--json` ([`freecode_ops::types`], the core folds, the index's hits).
//! `--html FILE` on `trace` and `session show` writes the same pages as one offline file
//! ([`export`]).
//!
//! A stable address: the port and the token are kept in the home (`state/ui.json`, 0600, see
//! [`Kept`]), so the next `freecode ui` serves at the same URL and a bookmark or an open tab
//! keeps working; `--new-token` makes a new token (links from before are refused, with a page
//! that says what to do). The cookie lasts [`COOKIE_DAYS`] days.

mod api;
pub mod export;
mod highlight;
mod pages;
pub mod redact;
mod text;
mod waterfall;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use freecode_ops::{Error, ErrorKind, Home};

/// The Content-Security-Policy of every response: nothing but this server's own script,
/// stylesheet and connections; images only from it or `data:` URLs; no inline script or style.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                       img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
                       form-action 'self'; frame-ancestors 'none'";

/// How long requests in progress may finish after Ctrl+C (live streams are cut then).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// The cookie holding the token after the first request: `freecode_ui_<port>` (browsers send
/// a host's cookies to every port of it, so one name per port keeps two homes' viewers apart).
fn cookie_name(addr: SocketAddr) -> String {
    format!("freecode_ui_{}", addr.port())
}

/// How long the browser keeps the token's cookie.
pub const COOKIE_DAYS: u32 = 30;

/// What `freecode ui` keeps between runs, in `state/ui.json` (0600): the port it serves on and
/// the token its links carry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Kept {
    /// The port of the last run that had its choice (`--listen` with a port, or the port kept).
    pub port: u16,
    /// The token, 32 hex digits.
    pub token: String,
}

/// Where [`Kept`] lives.
fn kept_path(home: &Home) -> std::path::PathBuf {
    home.state_dir().join("ui.json")
}

/// The kept port and token; `None` when there are none or they do not read (a token that is
/// not 32 hex digits is not used).
fn load_kept(home: &Home) -> Option<Kept> {
    let path = kept_path(home);
    let bytes = match freecode_store::fsutil::read_bounded(&path, 4096, "ui state") {
        Ok(b) => b?,
        Err(e) => {
            tracing::warn!("{e}: a new token is made");
            return None;
        }
    };
    match serde_json::from_slice::<Kept>(&bytes) {
        Ok(k) if k.token.len() == 32 && k.token.bytes().all(|b| b.is_ascii_hexdigit()) => Some(k),
        _ => {
            tracing::warn!("{} does not read: a new token is made", path.display());
            None
        }
    }
}

/// Saves what the next run reuses; a failure is a warning (this run serves anyway).
fn save_kept(home: &Home, kept: &Kept) {
    let path = kept_path(home);
    let res = freecode_store::fsutil::create_dir_private(&home.state_dir()).and_then(|()| {
        let json = serde_json::to_vec_pretty(kept).unwrap_or_default();
        freecode_store::fsutil::write_atomic(&path, &json, true)
    });
    if let Err(e) = res {
        tracing::warn!("could not keep the address for the next run: {e}");
    }
}

/// How `freecode ui` serves.
#[derive(Debug, Clone)]
pub struct Options {
    /// Address to listen on: a loopback address (127.x.y.z); port 0 picks a free one for this
    /// run. `None`: 127.0.0.1 on the port kept from the last run (a free one the first time,
    /// or when another program holds it).
    pub listen: Option<String>,
    /// Print the URL without opening a browser.
    pub no_open: bool,
    /// Make a new token: links and cookies from before stop working.
    pub new_token: bool,
    /// Show secrets as they are (by default every page and API answer is redacted as `session
    /// export` redacts: [`redact::PageRedactor`]).
    pub no_redact: bool,
}

/// What every handler shares: the home and the run's token and address.
pub(crate) struct Ui {
    pub(crate) home: Home,
    token: String,
    addr: SocketAddr,
    /// The last trace folded ([`api::TraceCache`]).
    pub(crate) traces: api::TraceCache,
    /// The last replay folded ([`api::ReplayCache`]).
    pub(crate) replays: api::ReplayCache,
    /// Live sessions' traces, tailed ([`api::LiveTraces`]).
    pub(crate) live: api::LiveTraces,
    /// How far an index refresh has got ([`api::Indexing`]).
    pub(crate) indexing: api::Indexing,
    /// Whether pages and API answers are redacted (all but `--no-redact`).
    pub(crate) redact: bool,
}

impl Ui {
    /// A page's redaction: the home's rules (read again when `redact.toml` changes), or none.
    pub(crate) fn redactor(&self) -> freecode_ops::Result<redact::PageRedactor> {
        redact::PageRedactor::for_home(&self.home, self.redact)
    }
}

/// The address `--listen` names, refused unless it is IPv4 loopback.
fn loopback(listen: &str) -> freecode_ops::Result<SocketAddr> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        Error::Invalid(format!(
            "--listen {listen:?}: expected ADDRESS:PORT, such as 127.0.0.1:0"
        ))
    })?;
    match addr {
        SocketAddr::V4(v4) if v4.ip().is_loopback() => Ok(addr),
        _ => Err(Error::Invalid(format!(
            "--listen {listen}: freecode ui serves your transcripts and listens on loopback only \
             (127.0.0.1); use an SSH tunnel to reach it from elsewhere"
        ))),
    }
}

/// 128 random bits from the OS, as 32 hex digits.
fn new_token() -> freecode_ops::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| Error::Internal(format!("random token: {e}")))?;
    Ok(hex::encode(bytes))
}

/// Equal strings, compared in time independent of where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// How often the viewer's filler embeds what is new (search by meaning).
const FILL_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves `home` as `opts` says until Ctrl+C; `announce` is handed the URL to open (with the
/// run's token) once the server listens.
pub fn serve(
    home: &Home,
    opts: &Options,
    announce: impl FnOnce(&str) -> std::io::Result<()>,
) -> freecode_ops::Result<()> {
    let kept = load_kept(home);
    let token = match &kept {
        Some(k) if !opts.new_token => k.token.clone(),
        _ => new_token()?,
    };
    let kept_port = kept.as_ref().map(|k| k.port);
    let (addr, fall_back) = match &opts.listen {
        Some(l) => (loopback(l)?, false),
        None => (
            SocketAddr::from(([127, 0, 0, 1], kept_port.unwrap_or(0))),
            kept_port.is_some_and(|p| p != 0),
        ),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // Ctrl+C is caught from before the URL is printed: one sent as soon as it is seen
        // stops the server cleanly rather than killing it mid-start.
        let mut interrupt =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => l,
            Err(e) if fall_back && e.kind() == std::io::ErrorKind::AddrInUse => {
                tracing::warn!(
                    "port {} is taken (another `freecode ui` of this home?): serving on a free \
                     port this time; the next run tries {} again",
                    addr.port(),
                    addr.port()
                );
                let any = SocketAddr::from(([127, 0, 0, 1], 0));
                tokio::net::TcpListener::bind(any)
                    .await
                    .map_err(|e| Error::Failed(format!("cannot listen on {any}: {e}")))?
            }
            Err(e) => return Err(Error::Failed(format!("cannot listen on {addr}: {e}"))),
        };
        let bound = listener.local_addr()?;
        // The port kept is the one asked for (a kept port, or `--listen` with a port), never a
        // one-off free port while the kept one is busy.
        let port = if addr.port() != 0 {
            addr.port()
        } else {
            kept_port
                .filter(|_| opts.listen.is_some())
                .unwrap_or(bound.port())
        };
        let keep = Kept {
            port,
            token: token.clone(),
        };
        if kept.as_ref() != Some(&keep) {
            save_kept(home, &keep);
        }
        let addr = bound;
        let url = format!("http://{addr}/?token={token}");
        announce(&url)?;
        let launcher = if opts.no_open {
            None
        } else {
            open_browser(home, addr, &url)
        };
        tracing::info!("serving {} on http://{addr}/", home.root().display());
        // Vectors for search by meaning are filled while the viewer runs (when an embedder
        // is configured).
        let stop_filler = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let filler =
            freecode_ops::meaning::spawn_filler(home.clone(), FILL_EVERY, stop_filler.clone())?;
        let ui = Arc::new(Ui {
            home: home.clone(),
            token,
            addr,
            traces: api::TraceCache::default(),
            replays: api::ReplayCache::default(),
            live: api::LiveTraces::default(),
            indexing: api::Indexing::default(),
            redact: !opts.no_redact,
        });
        // The share server's connection bounds (a head within 10 s, idle for at most 60 s;
        // the live streams' keep-alive comments every 15 s keep them from looking stalled),
        // with the spare sockets a browser opens and never uses closed without a warning.
        // Ctrl+C: stop accepting, let requests in progress finish, but not a live stream
        // (server-sent events never end by themselves): they are cut after a grace period.
        freecode_http::serve(
            listener,
            router(ui),
            freecode_http::ConnLimits {
                quiet_unused: true,
                ..Default::default()
            },
            SHUTDOWN_GRACE,
            async move {
                interrupt.recv().await;
            },
        )
        .await;
        stop_filler.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = filler.join();
        if let Some(path) = launcher
            && let Err(e) = freecode_store::fsutil::remove_file(&path)
        {
            tracing::warn!("could not remove {}: {e}", path.display());
        }
        Ok(())
    })
}

/// Opens the browser on the UI without putting the token on a command line (which other users
/// can read in the process table): a private page in the home's state directory
/// (`state/ui-<port>.html`, 0600, removed when the server stops) that forwards to the URL is
/// handed to the desktop's opener (`xdg-open`, `open` on macOS). The URL was printed anyway, so
/// a failure is only logged. Returns the page's path.
fn open_browser(home: &Home, addr: SocketAddr, url: &str) -> Option<std::path::PathBuf> {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let path = home.state_dir().join(format!("ui-{}.html", addr.port()));
    let page = pages::launch_page(url).into_string();
    let written = freecode_store::fsutil::create_dir_private(&home.state_dir())
        .and_then(|()| freecode_store::fsutil::write_atomic(&path, page.as_bytes(), false));
    if let Err(e) = written {
        tracing::warn!(
            "could not write {} ({e}); open the URL above",
            path.display()
        );
        return None;
    }
    match std::process::Command::new(opener)
        .arg(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        // Reaped on a thread of its own: the opener may outlive a browser start.
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(e) => tracing::warn!("could not start {opener} ({e}); open the URL above"),
    }
    Some(path)
}

fn router(ui: Arc<Ui>) -> Router {
    api::routes()
        .merge(pages::routes())
        .layer(axum::middleware::from_fn_with_state(ui.clone(), guard))
        .with_state(ui)
}

/// A refusal: 403 with a plain-text reason.
fn forbidden(why: &'static str) -> Response {
    (StatusCode::FORBIDDEN, why).into_response()
}

/// Whether `host` (a `Host` or the authority of an `Origin`) is this server: the bound
/// address, or `localhost` on its port.
fn is_us(host: &str, addr: SocketAddr) -> bool {
    host == addr.to_string() || host == format!("localhost:{}", addr.port())
}

/// The token a request carries: in its query (`token=`), or in the cookie.
fn tokens(req: &Request, cookie_name: &str) -> (Option<String>, Option<String>) {
    let query = req.uri().query().and_then(|q| {
        q.split('&')
            .find_map(|kv| kv.strip_prefix("token="))
            .map(str::to_owned)
    });
    let cookie = req
        .headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(cookie_name)
                .and_then(|v| v.strip_prefix('='))
                .map(str::to_owned)
        });
    (query, cookie)
}

/// Every request: the Host, the origin, then the token; every answer: the security headers.
async fn guard(State(ui): State<Arc<Ui>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    if !host.is_some_and(|h| is_us(h, ui.addr)) {
        return secured(forbidden("forbidden: unknown Host"));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let ours = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|h| is_us(h, ui.addr));
        if !ours {
            return secured(forbidden("forbidden: cross-origin request"));
        }
    }
    let name = cookie_name(ui.addr);
    let (query, cookie) = tokens(&req, &name);
    if let Some(t) = query {
        if !same_secret(&t, &ui.token) {
            return secured(pages::stale_link_page(
                "This link's token is not the one this freecode ui uses.",
            ));
        }
        // The token moves into the cookie and out of the address bar and history. The first
        // request may come from elsewhere (the launch page is a file), so the cookie is set by
        // a page that then reloads from this origin, where a SameSite=Strict cookie is sent.
        let rest: Vec<&str> = req
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .filter(|kv| !kv.starts_with("token=") && !kv.is_empty())
            .collect();
        let mut to = req.uri().path().to_owned();
        if !rest.is_empty() {
            to.push('?');
            to.push_str(&rest.join("&"));
        }
        let mut resp = pages::handshake_page(&to).into_response();
        if let Ok(v) = HeaderValue::from_str(&format!(
            "{name}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
            ui.token,
            u64::from(COOKIE_DAYS) * 86_400
        )) {
            resp.headers_mut().insert(header::SET_COOKIE, v);
        }
        return secured(resp);
    }
    if let Some(site) = headers.get("sec-fetch-site")
        && !matches!(site.to_str(), Ok("same-origin" | "none"))
    {
        return secured(forbidden("forbidden: cross-site request"));
    }
    if !cookie.is_some_and(|c| same_secret(&c, &ui.token)) {
        return secured(pages::stale_link_page(
            "This browser has no key for this freecode ui, or an old one.",
        ));
    }
    secured(next.run(req).await)
}

/// The security headers every response carries.
fn secured(mut resp: Response) -> Response {
    let h: &mut HeaderMap = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// What a handler can fail with: an HTTP status and a message for the page.
pub(crate) struct UiError {
    status: StatusCode,
    message: String,
}

impl UiError {
    pub(crate) fn not_found(what: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: what.into(),
        }
    }

    pub(crate) fn bad_request(what: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: what.into(),
        }
    }
}

impl From<Error> for UiError {
    fn from(e: Error) -> Self {
        let status = match e.kind() {
            ErrorKind::Invalid => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Busy => StatusCode::CONFLICT,
            ErrorKind::Failed | ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let message = freecode_ops::error::chain(&e);
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::warn!("ui: {message}");
        }
        Self { status, message }
    }
}

impl From<freecode_store::StoreError> for UiError {
    fn from(e: freecode_store::StoreError) -> Self {
        Error::from(e).into()
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let page = pages::error_page(self.status, &self.message);
        (self.status, page).into_response()
    }
}

/// A failure of a JSON endpoint: the status, and `{"error": message, "status": code}`.
pub(crate) struct ApiError(UiError);

impl From<UiError> for ApiError {
    fn from(e: UiError) -> Self {
        Self(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": self.0.message, "status": self.0.status.as_u16()});
        (self.0.status, axum::Json(body)).into_response()
    }
}

/// Runs store work (blocking file and SQLite reads) off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, UiError> + Send + 'static,
) -> Result<T, UiError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => Err(Error::Internal(format!("ui worker: {e}")).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ipv4_loopback_is_accepted() {
        assert!(loopback("127.0.0.1:0").is_ok());
        assert!(loopback("127.1.2.3:8080").is_ok());
        for bad in [
            "0.0.0.0:0",
            "192.168.1.2:80",
            "[::1]:0",
            "[::]:0",
            "localhost",
        ] {
            let err = loopback(bad).map(|_| ()).err().map(|e| e.to_string());
            assert!(err.is_some(), "{bad} accepted");
        }
    }

    #[test]
    fn tokens_are_128_random_bits_in_hex() {
        let (a, b) = (
            new_token().unwrap_or_default(),
            new_token().unwrap_or_default(),
        );
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(same_secret(&a, &a.clone()));
        assert!(!same_secret(&a, &b));
        assert!(!same_secret(&a, &a[..31]));
    }

    #[test]
    fn the_host_must_be_this_server() {
        let addr: SocketAddr = "127.0.0.1:4321"
            .parse()
            .unwrap_or(SocketAddr::from(([0; 4], 0)));
        assert!(is_us("127.0.0.1:4321", addr));
        assert!(is_us("localhost:4321", addr));
        assert!(!is_us("127.0.0.1:4322", addr));
        assert!(!is_us("evil.example:4321", addr));
        assert!(!is_us("127.0.0.1", addr));
    }
}
