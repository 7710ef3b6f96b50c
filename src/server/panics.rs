//! Panics while rendering a page: Leptos loads a page's data in tasks of
//! their own (spawned through `any_spawner`), where a panic would leave the
//! page waiting forever for data that never comes. [`install`] makes every
//! such task report a panic to the request it was spawned for, and
//! [`answer_panics`] then answers that request with a 500. Panics in the
//! request's own task are caught by `CatchPanicLayer` (see `super::guarded`).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use any_spawner::{CustomExecutor, Executor, PinnedFuture, PinnedLocalFuture};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::FutureExt;
use tokio::sync::Notify;

/// Whether a task spawned for one request panicked.
#[derive(Default)]
struct Panicked {
    happened: AtomicBool,
    notify: Notify,
}

tokio::task_local! {
    /// The request being served, for the tasks its handler spawns.
    static REQUEST: Arc<Panicked>;
}

/// Spawns on tokio like Leptos's own executor, and reports a panic of the
/// task to the request it was spawned for.
struct Reporting;

impl CustomExecutor for Reporting {
    fn spawn(&self, fut: PinnedFuture<()>) {
        let request = REQUEST.try_with(Arc::clone).ok();
        let reporter = request.clone();
        let task = async move {
            if let Err(panic) = AssertUnwindSafe(fut).catch_unwind().await {
                let details = super::guard::panic_message(panic.as_ref());
                tracing::error!(panic = %details, "a task rendering a page panicked");
                if let Some(request) = reporter {
                    request.happened.store(true, Ordering::SeqCst);
                    request.notify.notify_one();
                }
            }
        };
        // Tasks spawned by this task belong to the same request.
        match request {
            Some(request) => tokio::spawn(REQUEST.scope(request, task)),
            None => tokio::spawn(task),
        };
    }

    fn spawn_local(&self, fut: PinnedLocalFuture<()>) {
        tokio::task::spawn_local(fut);
    }

    fn poll_local(&self) {}
}

/// Makes Leptos spawn its tasks through [`Reporting`]; must run before
/// anything else sets the executor (it can be set once per process).
pub fn install() {
    if Executor::init_custom_executor(Reporting).is_err() {
        tracing::debug!("the task executor was set before; panics in page data tasks are not reported");
    }
}

/// Answers a request with a 500 as soon as a task spawned for it panics.
pub async fn answer_panics(req: Request, next: Next) -> Response {
    let request = Arc::new(Panicked::default());
    let served = REQUEST.scope(request.clone(), next.run(req));
    let response = tokio::select! {
        response = served => response,
        _ = request.notify.notified() => return super::guard::panic_answer(),
    };
    if request.happened.load(Ordering::SeqCst) {
        return super::guard::panic_answer();
    }
    response
}
