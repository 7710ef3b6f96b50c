//! Evaluations: judging finished runs. [`scorers`] holds runlens's built-in
//! scorers (exact, contains, regex, JSON, numeric, tool calls, bounds): pure,
//! deterministic functions from a scorer's configuration and a run's
//! [`ScoreSubject`](crate::model::ScoreSubject) to a
//! [`Verdict`](crate::model::Verdict).

mod calls;
pub mod scorers;

pub use scorers::{check, score};
