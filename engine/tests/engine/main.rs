//! Integration tests of the engine against a real SQLite file: the loop,
//! tool failures, limits, cancellation, idempotent ids and crash recovery.
//! (One test binary for the crate; modules below group the cases.)

mod support;

mod agents;
mod approval_inbox;
mod approvals;
mod bounds;
mod compare;
mod conversation;
mod create_and_list;
mod durability;
mod events;
mod forks;
mod grants;
mod groups;
mod http_tools;
mod identity;
mod layers;
mod loop_rules;
mod mcp;
mod openai;
mod otel_export;
mod otlp;
mod outcomes;
mod probe;
mod properties;
mod receiver;
mod recovery;
mod requests;
mod retention;
mod scale;
mod search;
mod selection;
mod servers;
mod state;
mod store_races;
mod trees;
mod webhooks;
