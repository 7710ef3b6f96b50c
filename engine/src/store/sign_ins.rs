//! Sign-in attempts, counted in the database so that every server on it
//! shares one budget per account and per client address (see
//! `Identity::take_sign_in_attempt`).
//!
//! A budget is one row of `sign_in_attempts`: how many attempts were taken
//! since its window began. Taking one is a single statement (an upsert whose
//! update applies only under the limit, or when the window has passed), so
//! of any number of concurrent attempts, on one server or several, at most
//! the limit are let through. The tables are the same in both databases
//! (`0021_sign_in_attempts.sql` in SQLite, `0010_sign_in_attempts.sql` in
//! PostgreSQL), so one implementation serves both (`sql/sign_ins.rs`).

use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};

use crate::error::Result;

#[async_trait]
pub trait SignInStore: Send + Sync {
    /// Counts one attempt against `subject` unless it has had `max` already
    /// in its current window (a window lasts `window` from its first
    /// attempt); `false` when over the limit, and then nothing changed.
    /// Windows that have passed are forgotten meanwhile.
    async fn take_sign_in_attempt(&self, subject: &str, max: u32, now: DateTime<Utc>, window: Duration)
        -> Result<bool>;
    /// Gives back one attempt taken from `subject` (one that turned out not
    /// to count: a successful sign-in, or one refused by another budget).
    async fn return_sign_in_attempt(&self, subject: &str) -> Result<()>;
    /// Forgets `subject`'s attempts (a successful sign-in of the account).
    async fn clear_sign_in_attempts(&self, subject: &str) -> Result<()>;
}

/// Takes an attempt if the window passed (a new window begins) or the count
/// is under the limit; returns no row otherwise. Binds: subject, now,
/// cutoff (now − window) three times, max.
pub(crate) const TAKE: &str = "INSERT INTO sign_in_attempts (subject, attempts, window_start) VALUES (?, 1, ?)
     ON CONFLICT (subject) DO UPDATE SET
         attempts = CASE WHEN sign_in_attempts.window_start <= ? THEN 1 ELSE sign_in_attempts.attempts + 1 END,
         window_start = CASE WHEN sign_in_attempts.window_start <= ?
             THEN excluded.window_start ELSE sign_in_attempts.window_start END
     WHERE sign_in_attempts.window_start <= ? OR sign_in_attempts.attempts < ?
     RETURNING attempts";
pub(crate) const FORGET_PASSED: &str = "DELETE FROM sign_in_attempts WHERE window_start <= ?";
pub(crate) const GIVE_BACK: &str =
    "UPDATE sign_in_attempts SET attempts = attempts - 1 WHERE subject = ? AND attempts > 0";
pub(crate) const CLEAR: &str = "DELETE FROM sign_in_attempts WHERE subject = ?";
