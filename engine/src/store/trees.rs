//! Trees of runs: a root run and every run its agent calls start, counted
//! against the tree's bounds (see `runner::budget` and
//! `migrations/sqlite/0022_run_trees.sql`).
//!
//! A tree is one row of `run_trees`: how many runs it started, the model
//! turns and tokens its runs took, and its bounds, fixed when the row is
//! made. Taking a run or a turn is a single conditional UPDATE that applies
//! only under the bounds, so of any number of concurrent children, on one
//! server or several, at most the bound are let through. The statements are
//! written once for every database (`sql/trees.rs`).

use async_trait::async_trait;

use crate::error::Result;
use crate::model::TreeLimits;

/// A tree's counters and bounds, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeCount {
    /// Runs started, the root included.
    pub runs: u64,
    /// Model turns of all its runs.
    pub turns: u64,
    /// Tokens of all its runs.
    pub tokens: u64,
    pub limits: TreeLimits,
}

#[async_trait]
pub trait TreeStore: Send + Sync {
    /// Makes the row of the tree under `root` (its root counted as its one
    /// run) with `limits`, unless it has one already (then it is left as is).
    async fn open_tree(&self, root: &str, limits: &TreeLimits) -> Result<()>;
    /// Counts one more run at `depth` in the tree under `root` when that
    /// stays within every bound (runs, depth, and turns and tokens not used
    /// up); `false` when it would not, or the tree has no row, and then
    /// nothing changed.
    async fn take_tree_run(&self, root: &str, depth: u32) -> Result<bool>;
    /// Counts one more model turn in the tree under `root` when its turns
    /// and tokens are not used up (`bounded`), or in any case (`!bounded`,
    /// the root's own turns); `false` when it was not counted (over a
    /// bound, or no row).
    async fn take_tree_turn(&self, root: &str, bounded: bool) -> Result<bool>;
    /// Adds `tokens` to the tree under `root` (nothing without a row).
    async fn add_tree_tokens(&self, root: &str, tokens: u64) -> Result<()>;
    /// The tree's counters and bounds, when it has a row.
    async fn tree(&self, root: &str) -> Result<Option<TreeCount>>;
}
