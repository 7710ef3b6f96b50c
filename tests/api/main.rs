//! API and page tests against `router(state)`, driven with `oneshot` (no
//! socket): status codes, error bodies, and server-rendered pages.

mod support;

mod agents_api;
mod agui_api;
mod approval_pages;
mod approvals_api;
mod bounds_api;
mod compare_api;
mod compare_pages;
mod conversation_api;
mod conversation_pages;
mod crash;
mod datasets_api;
mod evaluators_api;
mod events_api;
mod experiment_sets_api;
mod experiments_api;
mod exports_api;
mod extractors_api;
mod forks_api;
mod groups_api;
mod groups_pages;
mod guard_api;
mod http_tools_api;
mod identity_api;
mod live_pages;
mod openapi_api;
mod otlp_api;
mod pages;
mod paging_api;
mod requests_api;
mod retention_api;
mod reviews_api;
mod run_fields_api;
mod runs_api;
mod scores_api;
mod scores_pages;
mod search_api;
mod servers_api;
mod sessions_api;
mod sign_in_api;
mod streams_api;
mod tools_api;
mod traces_api;
mod webhooks_api;
