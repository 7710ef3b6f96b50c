//! Long-lived responses — the Server-Sent Events streams and the long-polls
//! — all go through here, so three promises hold for every one of them:
//!
//! - **Bounded per caller.** One user or API key has at most
//!   `max_per_caller` of them open at once (each SSE stream, each long-poll
//!   while it waits); one more is a 429 with `Retry-After`, and changes
//!   nothing.
//! - **Ended when the caller may no longer see them.** Every [`RECHECK`] the
//!   credentials behind the open ones are looked up again, as
//!   `auth::authenticate` would (`auth::current_caller`, one lookup per
//!   credential): a revoked key, a session that ended (signed out, expired,
//!   its password reset), a user gone, or the role lost in the project the
//!   response is about ends a stream, and makes a long-poll answer 401
//!   (credentials) or 404 (a project no longer the caller's to see). The
//!   lookups go to the database, so a key revoked through another server
//!   sharing it counts as well.
//! - **Ended when the server shuts down** ([`Closing`]): a stream ends, a
//!   long-poll stops waiting and answers what is there now.
//!
//! A handler takes a [`Live`] (an extractor), checks what the caller may see
//! as usual, then [`Live::open`]s the response — about one project, needing
//! one role there — before doing anything else, and answers with
//! [`Opened::sse`] or awaits [`Opened::wait`]. There is no other way to
//! build an event-stream response in this server.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::stream::{Stream, StreamExt};
use runlens_engine::model::Role;
use runlens_engine::Engine;
use tokio::sync::watch;

use super::auth::{current_caller, Caller, Credential};
use super::error::AppError;
use super::state::{AppState, Closing};

/// How often the credentials behind open streams and waits are checked again.
pub const RECHECK: Duration = Duration::from_secs(2);

/// Streams and waits one caller may have open at once, by default.
pub const DEFAULT_MAX_PER_CALLER: usize = 32;

/// A comment line is sent this often on an idle stream, so proxies and
/// browsers keep the connection open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Why a response ended early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lost {
    /// The key was revoked, the session ended or the user is gone.
    Credentials,
    /// The caller no longer has the role in the project.
    Role,
}

/// The open long-lived responses of one server (one per [`AppState`]).
pub struct Streams {
    engine: Engine,
    max_per_caller: usize,
    inner: Mutex<Inner>,
    /// The task rechecking credentials, started with the first response.
    checker: OnceLock<()>,
}

#[derive(Default)]
struct Inner {
    next_id: u64,
    /// Open responses per caller (actor id).
    per_caller: HashMap<String, usize>,
    open: HashMap<u64, Arc<Watched>>,
}

/// What one open response is about, and how it learns it must end.
struct Watched {
    credential: Credential,
    project: String,
    need: Role,
    lost: watch::Sender<Option<Lost>>,
}

impl Streams {
    pub fn new(engine: Engine, max_per_caller: usize) -> Streams {
        Streams { engine, max_per_caller: max_per_caller.max(1), inner: Mutex::default(), checker: OnceLock::new() }
    }

    /// How many long-lived responses are open now.
    pub fn open_count(&self) -> usize {
        self.lock().open.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn start_checker(self: &Arc<Self>) {
        self.checker.get_or_init(|| {
            tokio::spawn(check_forever(Arc::downgrade(self)));
        });
    }

    /// Checks every open response's caller once (see the module docs).
    async fn check_once(&self) {
        let open: Vec<Arc<Watched>> = self.lock().open.values().cloned().collect();
        let mut callers: HashMap<Credential, Option<Caller>> = HashMap::new();
        for watched in open {
            if watched.lost.borrow().is_some() {
                continue;
            }
            let caller = match callers.get(&watched.credential) {
                Some(caller) => caller.clone(),
                None => match current_caller(&self.engine, &watched.credential).await {
                    Ok(caller) => callers.entry(watched.credential.clone()).or_insert(caller).clone(),
                    // The store failed (and said so in the log): no verdict this round.
                    Err(_) => continue,
                },
            };
            let lost = match caller {
                None => Some(Lost::Credentials),
                Some(c) if !c.can(&watched.project, watched.need) => Some(Lost::Role),
                Some(_) => None,
            };
            if lost.is_some() {
                watched.lost.send_replace(lost);
            }
        }
    }
}

async fn check_forever(streams: Weak<Streams>) {
    let mut every = tokio::time::interval(RECHECK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(streams) = streams.upgrade() else { return };
        streams.check_once().await;
    }
}

/// The extractor of a handler that may answer with a long-lived response.
pub struct Live {
    caller: Caller,
    streams: Arc<Streams>,
    closing: Option<Closing>,
}

impl FromRequestParts<AppState> for Live {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let caller = Caller::from_request_parts(parts, state).await?;
        let closing = parts.extensions.get::<Closing>().cloned();
        Ok(Live { caller, streams: state.streams.clone(), closing })
    }
}

impl Live {
    /// Opens a long-lived response about `project`, for as long as the
    /// caller has at least `need` there: a 429 when the caller has as many
    /// open as allowed already.
    pub fn open(self, project: &str, need: Role) -> Result<Opened, AppError> {
        let Live { caller, streams, closing } = self;
        let who = caller.actor.id;
        let (lost, watch) = watch::channel(None);
        let id = {
            let mut inner = streams.lock();
            let open = inner.per_caller.get(&who).copied().unwrap_or(0);
            if open >= streams.max_per_caller {
                return Err(AppError::TooManyRequests {
                    message: format!(
                        "{open} event streams and waits of this caller are open already (the limit); close one first"
                    ),
                    retry_after_s: RECHECK.as_secs().max(1),
                });
            }
            inner.per_caller.insert(who.clone(), open + 1);
            inner.next_id += 1;
            let id = inner.next_id;
            let watched = Watched { credential: caller.credential, project: project.to_owned(), need, lost };
            inner.open.insert(id, Arc::new(watched));
            id
        };
        streams.start_checker();
        Ok(Opened { slot: Slot { streams, id, who }, lost: watch, closing })
    }
}

/// An open long-lived response's place among the caller's; given back when dropped.
struct Slot {
    streams: Arc<Streams>,
    id: u64,
    who: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut inner = self.streams.lock();
        inner.open.remove(&self.id);
        if let Some(n) = inner.per_caller.get_mut(&self.who) {
            *n -= 1;
            if *n == 0 {
                inner.per_caller.remove(&self.who);
            }
        }
    }
}

/// An opened long-lived response (see [`Live::open`]).
pub struct Opened {
    slot: Slot,
    lost: watch::Receiver<Option<Lost>>,
    closing: Option<Closing>,
}

impl Opened {
    /// Resolves when the response must end: with why when the caller lost
    /// access, with `None` when the server is shutting down.
    async fn ended(&mut self) -> Option<Lost> {
        let closing = self.closing.clone();
        let closed = async move {
            match closing {
                Some(closing) => closing.closed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            lost = self.lost.wait_for(Option::is_some) => lost.ok().and_then(|l| *l).or(Some(Lost::Credentials)),
            () = closed => None,
        }
    }

    /// The SSE response of `stream`, which ends when the caller loses access
    /// or the server shuts down (a comment every [`KEEP_ALIVE`] meanwhile).
    pub fn sse(mut self, stream: impl Stream<Item = Result<SseEvent, Infallible>> + Send + 'static) -> Response {
        let end = async move {
            if let Some(lost) = self.ended().await {
                tracing::info!(?lost, stream = self.slot.id, "an event stream ended: its caller lost access");
            }
        };
        let stream = stream.take_until(end);
        let mut res = Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
        // Reverse proxies (nginx) must not buffer a live stream.
        res.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
        res
    }

    /// Awaits `wait` unless the caller loses access first (401 when the
    /// credentials are gone, 404 when the role in the project is) or the
    /// server shuts down (`None`: answer with what is there now).
    pub async fn wait<T>(mut self, wait: impl Future<Output = T>) -> Result<Option<T>, AppError> {
        tokio::select! {
            done = wait => Ok(Some(done)),
            lost = self.ended() => match lost {
                None => Ok(None),
                Some(Lost::Credentials) => Err(AppError::Unauthorized(
                    "the API key was revoked or the session ended while waiting".into(),
                )),
                Some(Lost::Role) => {
                    let project = self.project();
                    Err(AppError::NotFound(format!("project `{project}` not found")))
                }
            },
        }
    }

    /// The project the response is about.
    fn project(&self) -> String {
        self.slot.streams.lock().open.get(&self.slot.id).map(|w| w.project.clone()).unwrap_or_default()
    }
}
