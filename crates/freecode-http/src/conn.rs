//! Connections: the accept loop, the caps on open connections, and the deadlines of a
//! connection that has no request in the handlers.
//!
//! Every accepted socket is registered in a [`Tracker`] before it is served. A connection is
//! in one [`Phase`] at a time, and the phase decides its deadline:
//!
//! - fresh (accepted, nothing received yet) — the request head must be complete within
//!   `header_timeout` of the accept, so a silent socket is closed then;
//! - receiving a head (some bytes in, no request yet) — complete within `header_timeout` of
//!   the first byte, so a head sent a line at a time is cut;
//! - idle keep-alive (a response done, no new byte) — closed after `idle_timeout` from the
//!   last byte written (hyper may still be flushing the end of the response);
//! - busy (a request in the handlers) — no deadline here: the handlers' request and body
//!   timeouts bound it (each server its own; the share server's in `freecode-remote`);
//! - responding (the response body is being written) — closed when a write makes no
//!   progress for `idle_timeout`, so a client that never reads cannot pin it.
//!
//! At most `max_connections` are open, and at most `max_connections_per_ip` from one client
//! address. A connection past a cap evicts the oldest connection (of that address, for the
//! per-address cap) that has no request in the handlers, and is served; only when every
//! connection in the way is busy is it closed at once. So silent or trickling sockets can hold
//! a slot only until a newer connection needs it, and `/healthz` from a fresh connection is
//! always answered. Refusals, evictions and timeouts are logged with the peer address only: as
//! warnings, except the ordinary ends (an idle keep-alive connection closed, and, for a server
//! a browser uses ([`ConnLimits::quiet_unused`]), a spare socket never used), at debug.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::body::OnEnd;

/// How long the accept loop pauses after an accept error that is not the client's (out of
/// file descriptors, say) before trying again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(250);

/// The connection settings of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// A request head must be complete within this of the accept (or of its first byte, on a
    /// reused connection).
    pub header_timeout: Duration,
    /// A keep-alive connection with no new request, or a response whose writes make no
    /// progress, is closed after this.
    pub idle_timeout: Duration,
    /// At most this many connections are open.
    pub max_connections: usize,
    /// At most this many from one client address (at most `max_connections`).
    pub max_connections_per_ip: usize,
    /// A socket closed at the header deadline without sending a byte is logged at debug, not
    /// as a warning: for a server a browser uses, which opens spare connections ahead of need.
    pub quiet_unused: bool,
}

impl Default for ConnLimits {
    /// The share server's defaults: heads within 10 s, idle for at most 60 s, 512 connections,
    /// 64 from one address.
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
            max_connections_per_ip: 64,
            quiet_unused: false,
        }
    }
}

/// What a connection is doing; see the module doc for the deadline of each.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// No byte of a request yet: since the accept (`fresh`) or since the last response.
    Idle { since: Instant, fresh: bool },
    /// Part of a request head has arrived, the first byte at `since`.
    Head { since: Instant },
    /// A request is in the handlers.
    Busy,
    /// Writing the response; `since` is the last write that made progress.
    Responding { since: Instant },
}

/// Why a connection was closed by the server rather than by its client or its own end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closed {
    /// Accepted, and not a byte before the header deadline.
    Unused,
    /// Part of a head, not all of it, before the header deadline.
    HeaderTimeout,
    IdleTimeout,
    WriteStalled,
    Evicted,
}

impl Closed {
    fn describe(self) -> &'static str {
        match self {
            Self::Unused | Self::HeaderTimeout => {
                "request head not received in time: closing the connection"
            }
            Self::IdleTimeout => {
                "keep-alive connection idle too long (no new request, or the end of a \
                 response not being read): closing it"
            }
            Self::WriteStalled => "client stopped reading the response: closing the connection",
            Self::Evicted => "connection cap reached: closing this idle connection for a new one",
        }
    }
}

/// One open connection, shared by its task, its socket wrapper, its service and the tracker.
#[derive(Debug)]
struct Conn {
    id: u64,
    peer: SocketAddr,
    phase: Mutex<Phase>,
    /// Wakes the connection's watchdog when the phase changes.
    changed: Notify,
    /// Tells the connection's task to close it (eviction, or shutdown while idle).
    evict: Notify,
}

impl Conn {
    /// The client address the per-address cap counts (an IPv4-mapped IPv6 address as IPv4).
    fn ip(&self) -> IpAddr {
        self.peer.ip().to_canonical()
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, phase: Phase) {
        *self.phase() = phase;
        self.changed.notify_one();
    }

    /// A read brought `n` bytes: the first bytes of a head start its clock.
    fn on_read(&self) {
        let mut phase = self.phase();
        if let Phase::Idle { .. } = *phase {
            *phase = Phase::Head {
                since: Instant::now(),
            };
            drop(phase);
            self.changed.notify_one();
        }
    }

    /// A write made progress: a response being written is not stalled. That includes the
    /// idle phase, as hyper lets go of a response body before it has flushed all of it.
    fn on_write(&self) {
        let mut phase = self.phase();
        if let Phase::Responding { since }
        | Phase::Idle {
            since,
            fresh: false,
        } = &mut *phase
        {
            // No wake-up needed: the watchdog re-checks the phase when its deadline comes.
            *since = Instant::now();
        }
    }

    /// Can be evicted: nothing of a request is in the handlers or being answered.
    fn is_idle(&self) -> bool {
        matches!(*self.phase(), Phase::Idle { .. } | Phase::Head { .. })
    }

    /// When the connection is to be closed and why, or `None` while it is busy.
    fn deadline(&self, limits: &ConnLimits) -> Option<(Instant, Closed)> {
        match *self.phase() {
            Phase::Idle { since, fresh: true } => {
                Some((since + limits.header_timeout, Closed::Unused))
            }
            Phase::Head { since } => Some((since + limits.header_timeout, Closed::HeaderTimeout)),
            Phase::Idle {
                since,
                fresh: false,
            } => Some((since + limits.idle_timeout, Closed::IdleTimeout)),
            Phase::Responding { since } => {
                Some((since + limits.idle_timeout, Closed::WriteStalled))
            }
            Phase::Busy => None,
        }
    }
}

/// The open connections, oldest first (ids only grow), and how many each address has.
#[derive(Debug, Default)]
struct Table {
    conns: BTreeMap<u64, Arc<Conn>>,
    per_ip: HashMap<IpAddr, usize>,
    next_id: u64,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Arc<Conn>> {
        let conn = self.conns.remove(&id)?;
        let ip = conn.ip();
        if let Some(n) = self.per_ip.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_ip.remove(&ip);
            }
        }
        Some(conn)
    }

    /// Evicts the oldest idle connection that `pick` accepts; false when there is none.
    fn evict_oldest_idle(&mut self, pick: impl Fn(&Conn) -> bool) -> bool {
        let victim = self
            .conns
            .values()
            .find(|c| pick(c) && c.is_idle())
            .map(|c| c.id);
        match victim.and_then(|id| self.remove(id)) {
            Some(conn) => {
                conn.evict.notify_one();
                tracing::warn!(peer = %conn.peer, "{}", Closed::Evicted.describe());
                true
            }
            None => false,
        }
    }
}

/// Why a new connection was closed at once.
#[derive(Debug, Clone, Copy)]
enum Refused {
    PerIp,
    Overall,
}

/// The registry of open connections that enforces the caps.
#[derive(Debug)]
struct Tracker {
    limits: ConnLimits,
    table: Mutex<Table>,
}

impl Tracker {
    fn new(limits: ConnLimits) -> Self {
        Self {
            limits,
            table: Mutex::new(Table::default()),
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new connection from `peer`, evicting an idle one past a cap.
    fn admit(self: &Arc<Self>, peer: SocketAddr) -> Result<Registered, Refused> {
        let ip = peer.ip().to_canonical();
        let mut table = self.table();
        let per_ip_cap = self
            .limits
            .max_connections_per_ip
            .min(self.limits.max_connections);
        if table.per_ip.get(&ip).copied().unwrap_or(0) >= per_ip_cap
            && !table.evict_oldest_idle(|c| c.ip() == ip)
        {
            return Err(Refused::PerIp);
        }
        if table.conns.len() >= self.limits.max_connections && !table.evict_oldest_idle(|_| true) {
            return Err(Refused::Overall);
        }
        let id = table.next_id;
        table.next_id += 1;
        let conn = Arc::new(Conn {
            id,
            peer,
            phase: Mutex::new(Phase::Idle {
                since: Instant::now(),
                fresh: true,
            }),
            changed: Notify::new(),
            evict: Notify::new(),
        });
        table.conns.insert(id, Arc::clone(&conn));
        *table.per_ip.entry(ip).or_insert(0) += 1;
        Ok(Registered {
            conn,
            tracker: Arc::clone(self),
        })
    }

    /// Closes every connection that has no request in the handlers (at shutdown).
    fn evict_all_idle(&self) {
        let mut table = self.table();
        let idle: Vec<u64> = table
            .conns
            .values()
            .filter(|c| c.is_idle())
            .map(|c| c.id)
            .collect();
        for id in idle {
            if let Some(conn) = table.remove(id) {
                conn.evict.notify_one();
            }
        }
    }

    /// How many connections are open (for the log).
    fn open(&self) -> usize {
        self.table().conns.len()
    }
}

/// A connection's place in the tracker, released when its task ends (or is aborted).
#[derive(Debug)]
struct Registered {
    conn: Arc<Conn>,
    tracker: Arc<Tracker>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.tracker.table().remove(self.conn.id);
    }
}

/// The socket, reporting reads and writes to its connection's phase.
#[derive(Debug)]
struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.on_read();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.on_write();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.on_write();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Marks its connection busy from the request's arrival until the response body is done or
/// dropped; then idle again.
#[derive(Debug)]
struct InFlight(Arc<Conn>);

impl InFlight {
    fn new(conn: &Arc<Conn>) -> Self {
        conn.set(Phase::Busy);
        Self(Arc::clone(conn))
    }

    fn responding(&self) {
        self.0.set(Phase::Responding {
            since: Instant::now(),
        });
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.set(Phase::Idle {
            since: Instant::now(),
            fresh: false,
        });
    }
}

/// The router as a hyper service that keeps the connection's phase.
#[derive(Clone)]
struct PhasedService {
    inner: TowerToHyperService<Router>,
    conn: Arc<Conn>,
}

impl hyper::service::Service<Request<Incoming>> for PhasedService {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, mut request: Request<Incoming>) -> Self::Future {
        // The peer, as axum's `ConnectInfo`: rules that count per client read it from here,
        // never from a header the client sent.
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(self.conn.peer));
        let in_flight = InFlight::new(&self.conn);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            in_flight.responding();
            // The connection stays in flight until the body is written (or dropped).
            Ok(response.map(|inner| OnEnd::wrap(inner, move || drop(in_flight))))
        })
    }
}

/// Serves one connection until it ends, its deadline passes, or it is evicted.
async fn drive(
    connection: impl Future<Output = hyper::Result<()>>,
    conn: &Conn,
    limits: ConnLimits,
) {
    let mut connection = std::pin::pin!(connection);
    loop {
        let deadline = conn.deadline(&limits);
        let changed = conn.changed.notified();
        tokio::select! {
            served = &mut connection => {
                if let Err(error) = served {
                    tracing::debug!(peer = %conn.peer, %error, "connection ended with an error");
                }
                return;
            }
            () = conn.evict.notified() => return,
            () = changed => {}
            () = sleep_until(deadline.map(|(at, _)| at)) => {
                // The phase may have moved on since the deadline was read.
                if let Some((at, why)) = conn.deadline(&limits)
                    && at <= Instant::now()
                {
                    // A keep-alive connection's end is ordinary HTTP; so is a browser's spare
                    // socket, where the server says so.
                    let ordinary = why == Closed::IdleTimeout
                        || (why == Closed::Unused && limits.quiet_unused);
                    if ordinary {
                        tracing::debug!(peer = %conn.peer, "{}", why.describe());
                    } else {
                        tracing::warn!(peer = %conn.peer, "{}", why.describe());
                    }
                    return;
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Accepts connections on `listener` and serves `router` on them until `shutdown`
/// completes; then closes idle connections at once, lets the busy ones finish for up to
/// `grace`, and drops what is left.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    grace: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let tracker = Arc::new(Tracker::new(limits));
    let graceful = GracefulShutdown::new();
    let mut tasks = JoinSet::new();
    let service = TowerToHyperService::new(router);
    let mut http = hyper::server::conn::http1::Builder::new();
    // The deadlines are this module's: hyper's header timer would also run while a
    // keep-alive connection is idle, making the idle timeout the header timeout.
    http.header_read_timeout(None).keep_alive(true);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let registered = match tracker.admit(peer) {
                        Ok(registered) => registered,
                        Err(refused) => {
                            let cap = match refused {
                                Refused::PerIp => "max_connections_per_ip",
                                Refused::Overall => "max_connections",
                            };
                            tracing::warn!(
                                %peer,
                                cap,
                                open = tracker.open(),
                                "connection cap reached and every connection is busy: \
                                 refusing the new one"
                            );
                            drop(stream);
                            continue;
                        }
                    };
                    let conn = Arc::clone(&registered.conn);
                    let io = TokioIo::new(Watched { stream, conn: Arc::clone(&conn) });
                    let connection = graceful.watch(http.serve_connection(
                        io,
                        PhasedService { inner: service.clone(), conn: Arc::clone(&conn) },
                    ));
                    tasks.spawn(async move {
                        let _registered = registered;
                        drive(connection, &conn, limits).await;
                    });
                }
                Err(error) if is_client_error(&error) => {}
                Err(error) => {
                    tracing::error!(%error, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
            Some(_) = tasks.join_next() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracker.evict_all_idle();
    let open = tracker.open();
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_s = grace.as_secs_f64(),
            open,
            "requests still in flight after the shutdown grace period: dropping them"
        );
    }
    tasks.shutdown().await;
}

/// Accept errors that concern one client only (it went away before being accepted).
fn is_client_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn tracker(max: usize, per_ip: usize) -> Arc<Tracker> {
        Arc::new(Tracker::new(ConnLimits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: max,
            max_connections_per_ip: per_ip,
            quiet_unused: false,
        }))
    }

    fn addr(ip: [u8; 4], port: u16) -> SocketAddr {
        SocketAddr::from((ip, port))
    }

    #[test]
    fn caps_evict_the_oldest_idle_connection_and_refuse_when_all_are_busy() {
        let t = tracker(3, 2);
        let a1 = t.admit(addr([10, 0, 0, 1], 1)).unwrap();
        let a2 = t.admit(addr([10, 0, 0, 1], 2)).unwrap();
        // Per address: the third from 10.0.0.1 evicts its oldest idle one.
        let a3 = t.admit(addr([10, 0, 0, 1], 3)).unwrap();
        assert!(!t.table().conns.contains_key(&a1.conn.id));
        assert_eq!(t.table().per_ip[&IpAddr::from([10, 0, 0, 1])], 2);
        // A busy connection is never evicted: with both busy, the next one is refused.
        let _b2 = InFlight::new(&a2.conn);
        let _b3 = InFlight::new(&a3.conn);
        assert!(matches!(
            t.admit(addr([10, 0, 0, 1], 4)),
            Err(Refused::PerIp)
        ));
        // Overall: another address fills the last slot, the next evicts it (the only idle one).
        let b1 = t.admit(addr([10, 0, 0, 2], 1)).unwrap();
        let b2 = t.admit(addr([10, 0, 0, 3], 1)).unwrap();
        assert!(!t.table().conns.contains_key(&b1.conn.id));
        let _busy = InFlight::new(&b2.conn);
        assert!(matches!(
            t.admit(addr([10, 0, 0, 4], 1)),
            Err(Refused::Overall)
        ));
        // An IPv4-mapped IPv6 peer counts as its IPv4 address.
        let mapped: SocketAddr = "[::ffff:10.0.0.1]:5".parse().unwrap();
        assert!(matches!(t.admit(mapped), Err(Refused::PerIp)));
        // Releasing frees the slot; a dropped evicted entry does not count twice.
        drop(b2);
        drop(b1);
        assert_eq!(t.open(), 2);
        assert!(t.admit(addr([10, 0, 0, 4], 1)).is_ok());
    }

    #[test]
    fn deadlines_follow_the_phase() {
        let t = tracker(8, 8);
        let r = t.admit(addr([127, 0, 0, 1], 1)).unwrap();
        let limits = t.limits;
        let (at, why) = r.conn.deadline(&limits).unwrap();
        assert_eq!(why, Closed::Unused);
        r.conn.on_read();
        assert!(matches!(*r.conn.phase(), Phase::Head { .. }));
        let (head_at, why) = r.conn.deadline(&limits).unwrap();
        assert_eq!(why, Closed::HeaderTimeout);
        assert!(head_at >= at);
        let busy = InFlight::new(&r.conn);
        assert!(r.conn.deadline(&limits).is_none());
        assert!(!r.conn.is_idle());
        busy.responding();
        assert_eq!(r.conn.deadline(&limits).unwrap().1, Closed::WriteStalled);
        drop(busy);
        assert_eq!(r.conn.deadline(&limits).unwrap().1, Closed::IdleTimeout);
        assert!(r.conn.is_idle());
    }
}
