//! One module per page (route) of the app.
//!
//! Every page loads its data through a server function in [`crate::api`]
//! inside `<Suspense>`/`<Transition>`, and the routes render in async SSR mode,
//! so the first response is complete HTML.

pub mod access;
pub mod agents;
pub mod approvals;
pub mod approvals_decided;
pub mod audit;
pub mod compare;
pub mod datasets;
pub mod evaluators;
pub mod experiments;
pub mod http_tools;
pub mod login;
pub mod outbox;
pub mod playground;
pub mod reviews;
pub mod runs;
pub mod runs_filters;
pub mod runs_table;
pub mod sessions;
pub mod settings;
pub mod to_review;
pub mod tools;
pub mod trace;
