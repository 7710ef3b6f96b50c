//! [`TreeStore`] for every backend: the `run_trees` table, the same in
//! both databases, with one text per statement (see `store::trees`).

use async_trait::async_trait;

use super::{sql, with_db, SqlStore};
use crate::error::Result;
use crate::model::TreeLimits;
use crate::store::trees::{TreeCount, TreeStore};
use crate::store::{now, to_ms};

const OPEN: &str = "INSERT INTO run_trees
     (root_run_id, runs, turns, tokens, max_runs, max_depth, max_turns, max_tokens, created_at)
     VALUES (?, 1, 0, 0, ?, ?, ?, ?, ?) ON CONFLICT (root_run_id) DO NOTHING";

/// One more run, only within every bound. Binds: root, the new run's depth.
const TAKE_RUN: &str = "UPDATE run_trees SET runs = runs + 1
     WHERE root_run_id = ? AND runs < max_runs AND ? <= max_depth
       AND (max_turns IS NULL OR turns < max_turns) AND (max_tokens IS NULL OR tokens < max_tokens)
     RETURNING runs";

/// One more turn, only while turns and tokens are left. Binds: root.
const TAKE_TURN: &str = "UPDATE run_trees SET turns = turns + 1
     WHERE root_run_id = ?
       AND (max_turns IS NULL OR turns < max_turns) AND (max_tokens IS NULL OR tokens < max_tokens)
     RETURNING turns";

/// One more turn, whatever the bounds (the root's own). Binds: root.
const COUNT_TURN: &str = "UPDATE run_trees SET turns = turns + 1 WHERE root_run_id = ? RETURNING turns";

const ADD_TOKENS: &str = "UPDATE run_trees SET tokens = tokens + ? WHERE root_run_id = ?";

const READ: &str = "SELECT runs, turns, tokens, max_runs, max_depth, max_turns, max_tokens
     FROM run_trees WHERE root_run_id = ?";

type TreeRow = (i64, i64, i64, i64, i64, Option<i64>, Option<i64>);

fn count(row: TreeRow) -> TreeCount {
    let (runs, turns, tokens, max_runs, max_depth, max_turns, max_tokens) = row;
    let small = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    let big = |n: i64| u64::try_from(n).unwrap_or(0);
    TreeCount {
        runs: big(runs),
        turns: big(turns),
        tokens: big(tokens),
        limits: TreeLimits {
            runs: small(max_runs),
            depth: small(max_depth),
            turns: max_turns.map(small),
            tokens: max_tokens.map(big),
        },
    }
}

/// A count as the database keeps it (BIGINT), saturating.
fn stored(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl<S: SqlStore> TreeStore for S {
    async fn open_tree(&self, root: &str, limits: &TreeLimits) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, OPEN))
                .bind(root)
                .bind(i64::from(limits.runs))
                .bind(i64::from(limits.depth))
                .bind(limits.turns.map(i64::from))
                .bind(limits.tokens.map(stored))
                .bind(to_ms(now()))
                .execute(pool)
                .await?;
        });
        Ok(())
    }

    async fn take_tree_run(&self, root: &str, depth: u32) -> Result<bool> {
        let taken: Option<i64> = with_db!(self.db(), |pool, D| {
            sqlx::query_scalar(sql!(D, TAKE_RUN)).bind(root).bind(i64::from(depth)).fetch_optional(pool).await?
        });
        Ok(taken.is_some())
    }

    async fn take_tree_turn(&self, root: &str, bounded: bool) -> Result<bool> {
        let taken: Option<i64> = with_db!(self.db(), |pool, D| {
            let text = if bounded { sql!(D, TAKE_TURN) } else { sql!(D, COUNT_TURN) };
            sqlx::query_scalar(text).bind(root).fetch_optional(pool).await?
        });
        Ok(taken.is_some())
    }

    async fn add_tree_tokens(&self, root: &str, tokens: u64) -> Result<()> {
        with_db!(self.db(), |pool, D| {
            sqlx::query(sql!(D, ADD_TOKENS)).bind(stored(tokens)).bind(root).execute(pool).await?;
        });
        Ok(())
    }

    async fn tree(&self, root: &str) -> Result<Option<TreeCount>> {
        let row: Option<TreeRow> =
            with_db!(self.db(), |pool, D| sqlx::query_as(sql!(D, READ)).bind(root).fetch_optional(pool).await?);
        Ok(row.map(count))
    }
}
