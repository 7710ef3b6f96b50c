//! Serving HTTP/1.1 connections with bounds, so that no client — signed in
//! or not — can exhaust the server: idle or slow sockets are closed, and the
//! server keeps answering `/healthz` and its pages while thousands of them
//! are open.
//!
//! - **A cap on open connections** ([`Limits::max_connections`], lowered to
//!   fit the process's open-file limit, which is first raised to its
//!   maximum; [`capacity`]). A connection accepted at the cap closes one
//!   that is idle (no request in flight) instead: one that has not sent a
//!   whole request yet, the longest-waiting first, else the keep-alive
//!   connection idle the longest. Only when every connection is busy is the
//!   new one closed at once. An accept that fails for want of file
//!   descriptors closes an idle connection the same way.
//! - **Timeouts.** A new connection must send a whole request head within
//!   [`Limits::header_timeout`]; between requests a connection stays open
//!   [`Limits::keep_alive`] at most; a request body must arrive whole within
//!   [`Limits::body_timeout`] of its head (else the request fails with a
//!   400 and the connection closes); a response that cannot send anything
//!   for [`Limits::send_timeout`] (the client stopped reading) is cut off.
//!   Long-lived responses (event streams, long-polls) are bounded per
//!   caller in `super::live`.
//! - **Shutdown**: no new connection; idle ones close, requests in flight
//!   finish (the caller bounds the wait, see `super::run`).
//!
//! [`Connections`] keeps the count and the idle order; each connection's
//! task ([`serve_one`]) wraps the app so that it knows when a request starts
//! and when its response has been sent. The body and socket deadlines are
//! in [`timeouts`].

mod timeouts;

pub use timeouts::BodyTimeout;
use timeouts::{SendTimeout, TimedBody};

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// How the server bounds connections (see the module docs) and long-lived
/// responses (see `super::live`).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Connections open at once (lowered to fit the open-file limit).
    pub max_connections: usize,
    /// A new connection must send a whole request head within this.
    pub header_timeout: Duration,
    /// A connection idle between requests is closed after this.
    pub keep_alive: Duration,
    /// A request body must arrive whole within this of its head.
    pub body_timeout: Duration,
    /// A response that sends nothing for this long is cut off.
    pub send_timeout: Duration,
    /// Event streams and long-polls one user or API key may have open at once.
    pub max_streams_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 10_000,
            header_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            max_streams_per_client: super::live::DEFAULT_MAX_PER_CALLER,
        }
    }
}

/// File descriptors kept free of connections: the database, outgoing HTTP
/// (models, tools, webhooks), MCP servers' pipes, log files.
pub const RESERVED_FDS: u64 = 512;

/// The fewest connections served whatever the open-file limit.
const MIN_CONNECTIONS: usize = 16;

/// Raises the process's open-file limit to its maximum (where the system
/// allows it) and returns how many connections to serve at once: `wanted`,
/// or fewer when the limit minus [`RESERVED_FDS`] is lower; with the limit.
pub fn capacity(wanted: usize) -> (usize, Option<u64>) {
    let limit = raise_open_file_limit();
    let fit = limit.map_or(usize::MAX, |l| usize::try_from(l.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX));
    (wanted.min(fit).max(MIN_CONNECTIONS), limit)
}

#[cfg(unix)]
fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit { current: limit.maximum, maximum: limit.maximum };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit = raised,
            Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
        }
    }
    limit.current
}

#[cfg(not(unix))]
fn raise_open_file_limit() -> Option<u64> {
    None
}

/// The open connections: how many count against the cap, and which are idle
/// in which order (see the module docs).
pub struct Connections {
    cap: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// Connections counted against the cap (those being closed for room are not).
    counted: usize,
    conns: HashMap<u64, Conn>,
    /// Idle connections that have not sent a whole request yet, oldest first.
    fresh: BTreeMap<u64, u64>,
    /// Idle connections between requests, idle the longest first.
    kept: BTreeMap<u64, u64>,
}

struct Conn {
    in_flight: usize,
    served: u64,
    /// Where it waits in `fresh` or `kept` while idle.
    idle_seq: Option<u64>,
    idle_since: Instant,
    counted: bool,
    shed: bool,
    wake: Arc<Notify>,
}

impl Connections {
    pub fn new(cap: usize) -> Connections {
        Connections { cap, inner: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Connections open now (counted against the cap).
    pub fn open(&self) -> usize {
        self.lock().counted
    }

    /// Makes room for one more connection and registers it; `None` when the
    /// server is at its cap with every connection busy.
    fn admit(self: &Arc<Self>) -> Option<ConnHandle> {
        let mut inner = self.lock();
        if inner.counted >= self.cap && !inner.shed_one() {
            return None;
        }
        inner.next += 1;
        let id = inner.next;
        let wake = Arc::new(Notify::new());
        let conn = Conn {
            in_flight: 0,
            served: 0,
            idle_seq: Some(id),
            idle_since: Instant::now(),
            counted: true,
            shed: false,
            wake: wake.clone(),
        };
        inner.conns.insert(id, conn);
        inner.fresh.insert(id, id);
        inner.counted += 1;
        Some(ConnHandle { conns: self.clone(), id, wake })
    }

    /// Closes an idle connection to free its descriptor (an accept failed).
    fn shed_for_descriptors(&self) -> bool {
        self.lock().shed_one()
    }
}

impl Inner {
    /// Tells the idle connection first in line to close (see the module
    /// docs); it no longer counts. `false` when none is idle.
    fn shed_one(&mut self) -> bool {
        let Some((_, id)) = self.fresh.pop_first().or_else(|| self.kept.pop_first()) else { return false };
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.idle_seq = None;
            conn.shed = true;
            if std::mem::take(&mut conn.counted) {
                self.counted -= 1;
            }
            conn.wake.notify_one();
        }
        true
    }

    fn set_busy(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if let Some(seq) = conn.idle_seq.take() {
            let queue = if conn.served == 0 { &mut self.fresh } else { &mut self.kept };
            queue.remove(&seq);
        }
        conn.in_flight += 1;
        conn.served += 1;
        conn.wake.notify_one();
    }

    fn set_done(&mut self, id: u64) {
        self.next += 1;
        let seq = self.next;
        let Some(conn) = self.conns.get_mut(&id) else { return };
        conn.in_flight = conn.in_flight.saturating_sub(1);
        if conn.in_flight == 0 && !conn.shed {
            conn.idle_seq = Some(seq);
            conn.idle_since = Instant::now();
            self.kept.insert(seq, id);
        }
        conn.wake.notify_one();
    }
}

/// One connection's place in [`Connections`]; removes it when dropped.
struct ConnHandle {
    conns: Arc<Connections>,
    id: u64,
    wake: Arc<Notify>,
}

impl Drop for ConnHandle {
    fn drop(&mut self) {
        let mut inner = self.conns.lock();
        if let Some(conn) = inner.conns.remove(&self.id) {
            if let Some(seq) = conn.idle_seq {
                inner.fresh.remove(&seq);
                inner.kept.remove(&seq);
            }
            if conn.counted {
                inner.counted -= 1;
            }
        }
    }
}

impl ConnHandle {
    /// Marks a request in flight until the returned guard is dropped.
    fn busy(&self) -> Busy {
        self.conns.lock().set_busy(self.id);
        Busy { conns: self.conns.clone(), id: self.id }
    }

    /// Whether no request of the connection has ever been in flight.
    fn never_busy(&self) -> bool {
        self.conns.lock().conns.get(&self.id).is_none_or(|c| c.served == 0)
    }

    /// Whether no request of the connection is in flight.
    fn is_idle(&self) -> bool {
        self.conns.lock().conns.get(&self.id).is_none_or(|c| c.in_flight == 0)
    }

    /// Resolves when the connection should close: it was chosen to make
    /// room, or has been idle longer than its timeout.
    async fn until_done(&self, limits: &Limits) {
        loop {
            let deadline = {
                let inner = self.conns.lock();
                let Some(conn) = inner.conns.get(&self.id) else { return };
                if conn.shed {
                    return;
                }
                let timeout = if conn.served == 0 { limits.header_timeout } else { limits.keep_alive };
                (conn.in_flight == 0).then(|| (conn.idle_since + timeout, conn.idle_since))
            };
            match deadline {
                None => self.wake.notified().await,
                Some((at, since)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {
                            let inner = self.conns.lock();
                            let still = inner.conns.get(&self.id).is_some_and(|c| c.in_flight == 0 && c.idle_since == since);
                            if still {
                                return;
                            }
                        }
                        () = self.wake.notified() => {}
                    }
                }
            }
        }
    }
}

/// A request in flight on a connection (see [`ConnHandle::busy`]).
struct Busy {
    conns: Arc<Connections>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conns.lock().set_done(self.id);
    }
}

/// Accepts connections on `listener` and serves `app` on each, within
/// `limits` and at most `cap` at once (see [`capacity`]), until `stop`
/// turns true; then lets the open connections finish and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    cap: usize,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let conns = Arc::new(Connections::new(cap));
    // Each connection task holds a receiver; all are gone once every task ended.
    let (all_done, task_alive) = watch::channel(());
    let mut warned: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                accept_failed(&conns, &e, &mut warned).await;
                continue;
            }
        };
        let Some(conn) = conns.admit() else {
            warn_now_and_then(&mut warned, || tracing::warn!(cap, "every connection is busy: refused one"));
            continue;
        };
        let task = ConnTask { app: app.clone(), limits: limits.clone(), remote, conn, stop: stop.clone() };
        let alive = task_alive.clone();
        tokio::spawn(async move {
            task.serve(stream).await;
            drop(alive);
        });
    }
    drop(listener);
    drop(task_alive);
    all_done.closed().await;
    Ok(())
}

/// An accept failed: for want of descriptors (or another cause that may
/// last), close an idle connection and wait a moment; a connection that
/// failed on its own way in is just skipped.
async fn accept_failed(conns: &Connections, e: &std::io::Error, warned: &mut Option<Instant>) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    let shed = conns.shed_for_descriptors();
    warn_now_and_then(
        warned,
        || tracing::warn!(error = %e, closed_an_idle_one = shed, "accepting a connection failed"),
    );
    tokio::time::sleep(Duration::from_millis(if shed { 5 } else { 50 })).await;
}

/// Runs `warn` at most once every 10 s.
fn warn_now_and_then(last: &mut Option<Instant>, warn: impl FnOnce()) {
    if last.is_none_or(|at| at.elapsed() >= Duration::from_secs(10)) {
        *last = Some(Instant::now());
        warn();
    }
}

/// One connection's task.
struct ConnTask {
    app: Router,
    limits: Limits,
    remote: SocketAddr,
    conn: ConnHandle,
    stop: watch::Receiver<bool>,
}

impl ConnTask {
    async fn serve(self, stream: TcpStream) {
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(SendTimeout::new(stream, self.limits.send_timeout));
        let conn = Arc::new(self.conn);
        let service = AppService {
            app: self.app,
            remote: self.remote,
            body_timeout: self.limits.body_timeout,
            conn: conn.clone(),
        };
        let connection = hyper::server::conn::http1::Builder::new().serve_connection(io, service).with_upgrades();
        let mut connection = std::pin::pin!(connection);
        let mut stop = self.stop;
        tokio::select! {
            _ = connection.as_mut() => return,
            () = conn.until_done(&self.limits) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
        // Closing. One that never had a request in flight has nothing to
        // finish: dropped at once (a request head it sent part of goes
        // with it). Otherwise an idle connection closes once its last
        // response is out, a request in flight finishes first; one that
        // has sent part of the next request head stays open for that, so
        // it is dropped after a moment if still idle.
        if conn.never_busy() {
            return;
        }
        connection.as_mut().graceful_shutdown();
        tokio::select! {
            _ = connection.as_mut() => return,
            () = tokio::time::sleep(CLOSE_IDLE_AFTER) => {}
        }
        if !conn.is_idle() {
            let _ = connection.await;
        }
    }
}

/// How long a connection being closed may take before it is dropped, when
/// no request of it is in flight (see `ConnTask::serve`).
const CLOSE_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The app as one connection's hyper service: each request counts as in
/// flight until its response has been sent, carries the client's address
/// (`ConnectInfo`), and its body a deadline.
#[derive(Clone)]
struct AppService {
    app: Router,
    remote: SocketAddr,
    body_timeout: Duration,
    conn: Arc<ConnHandle>,
}

impl hyper::service::Service<hyper::Request<Incoming>> for AppService {
    type Response = hyper::Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let busy = self.conn.busy();
        let mut req = req.map(|body| Body::new(TimedBody::new(body, self.body_timeout)));
        req.extensions_mut().insert(ConnectInfo(self.remote));
        let app = self.app.clone();
        Box::pin(async move {
            let res = tower::ServiceExt::oneshot(app, req).await?;
            Ok(res.map(|body| Tracked { body, _busy: busy }))
        })
    }
}

/// A response body that keeps its request in flight until it is dropped.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
