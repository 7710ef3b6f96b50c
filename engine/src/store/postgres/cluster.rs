//! Leases, the server registry and notifications on PostgreSQL (see
//! `store::cluster`). Claims take rows with `FOR UPDATE SKIP LOCKED`, so two
//! servers never claim the same run; notifications are `NOTIFY` on a channel
//! of the store's schema, carrying ids only (PostgreSQL's 8 kB limit never
//! comes near), and are delivered when the notifying transaction commits.

use async_trait::async_trait;
use chrono::Utc;
use sqlx::postgres::PgListener;

use super::PgStore;
use crate::error::{EngineError, Result};
use crate::model::{RunStatus, Server};
use crate::store::cluster::{fence_for, ClusterStore, Fence, Notice, Notices, Released};
use crate::store::{from_ms, to_ms};

fn now_ms() -> i64 {
    to_ms(Utc::now())
}

/// Refuses a write of run `run_id` from a driver that no longer holds its
/// lease. Called first in each write transaction of the run's loop: the row
/// lock it takes makes a concurrent claim wait for this transaction, so a
/// write either commits under the lease or not at all.
pub(super) async fn check_fence(conn: &mut sqlx::PgConnection, run_id: &str) -> Result<()> {
    let Some(fence) = fence_for(run_id) else { return Ok(()) };
    let held: Option<i64> =
        sqlx::query_scalar("SELECT attempt FROM runs WHERE id = $1 AND lease_owner = $2 AND attempt = $3 FOR UPDATE")
            .bind(run_id)
            .bind(&fence.owner)
            .bind(fence.attempt as i64)
            .fetch_optional(&mut *conn)
            .await?;
    match held {
        Some(_) => Ok(()),
        None => Err(EngineError::LeaseLost(run_id.to_owned())),
    }
}

fn encode(notice: &Notice) -> String {
    match notice {
        Notice::Events { from, run_id, first, last } => format!("e\t{from}\t{run_id}\t{first}\t{last}"),
        Notice::Cancel { run_id } => format!("c\t{run_id}"),
        Notice::Work | Notice::Reconnected => "w".to_owned(),
    }
}

fn decode(payload: &str) -> Option<Notice> {
    let mut parts = payload.split('\t');
    match parts.next()? {
        "e" => Some(Notice::Events {
            from: parts.next()?.to_owned(),
            run_id: parts.next()?.to_owned(),
            first: parts.next()?.parse().ok()?,
            last: parts.next()?.parse().ok()?,
        }),
        "c" => Some(Notice::Cancel { run_id: parts.next()?.to_owned() }),
        "w" => Some(Notice::Work),
        _ => None,
    }
}

/// `NOTIFY` inside the caller's transaction (delivered at its commit).
pub(super) async fn notify_in(conn: &mut sqlx::PgConnection, channel: &str, notice: &Notice) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)").bind(channel).bind(encode(notice)).execute(conn).await?;
    Ok(())
}

type ServerRow = (String, String, String, i64, i64, i64, i64);

#[async_trait]
impl ClusterStore for PgStore {
    fn instance(&self) -> &str {
        &self.instance
    }

    async fn heartbeat(&self, server: &Server, lease_ms: i64) -> Result<u64> {
        let now = now_ms();
        let mut tx = self.pool.begin().await?;
        let held = sqlx::query("UPDATE runs SET lease_until = $2 WHERE lease_owner = $1")
            .bind(&server.id)
            .bind(now + lease_ms)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        sqlx::query(
            "INSERT INTO servers (id, address, version, started_at, heartbeat_at, runs_held, max_runs)
             VALUES ($1, $2, $3, $4, $5, $6, $7)
             ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address, heartbeat_at = EXCLUDED.heartbeat_at,
                runs_held = EXCLUDED.runs_held, max_runs = EXCLUDED.max_runs",
        )
        .bind(&server.id)
        .bind(&server.address)
        .bind(&server.version)
        .bind(to_ms(server.started_at))
        .bind(now)
        .bind(held as i64)
        .bind(server.max_runs as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(held)
    }

    async fn servers(&self, lease_ms: i64, keep_ms: i64) -> Result<Vec<Server>> {
        let now = now_ms();
        sqlx::query("DELETE FROM servers WHERE heartbeat_at < $1").bind(now - keep_ms).execute(&self.pool).await?;
        let rows: Vec<ServerRow> = sqlx::query_as(
            "SELECT id, address, version, started_at, heartbeat_at, runs_held, max_runs FROM servers
             ORDER BY started_at, id LIMIT 1000",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, address, version, started, beat, held, max)| Server {
                id,
                address,
                version,
                started_at: from_ms(started),
                heartbeat_at: from_ms(beat),
                runs_held: held.max(0) as u64,
                max_runs: max.max(0) as u64,
                alive: beat >= now - lease_ms,
                this: false,
            })
            .collect())
    }

    async fn leave(&self, server_id: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE runs SET lease_owner = NULL, lease_until = NULL WHERE lease_owner = $1")
            .bind(server_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM servers WHERE id = $1").bind(server_id).execute(&mut *tx).await?;
        notify_in(&mut tx, &self.channel, &Notice::Work).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn claim(&self, run_id: &str, owner: &str, lease_ms: i64) -> Result<Option<u64>> {
        let now = now_ms();
        let attempt: Option<i64> = sqlx::query_scalar(
            "UPDATE runs SET lease_owner = $2, lease_until = $3, attempt = attempt + 1, parked = FALSE,
                rewake = FALSE
             WHERE id = $1 AND status IN ('pending', 'running') AND source IS NULL
                AND (lease_owner IS NULL OR lease_until < $4)
             RETURNING attempt",
        )
        .bind(run_id)
        .bind(owner)
        .bind(now + lease_ms)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        if attempt.is_none() {
            // Held by another server (or by this one): its holder looks again
            // when it lets go.
            sqlx::query("UPDATE runs SET rewake = TRUE WHERE id = $1 AND lease_owner IS NOT NULL AND NOT rewake")
                .bind(run_id)
                .execute(&self.pool)
                .await?;
        }
        Ok(attempt.map(|a| a as u64))
    }

    async fn claim_next(&self, owner: &str, lease_ms: i64) -> Result<Option<(String, u64)>> {
        let now = now_ms();
        // Runs whose holder stopped renewing come first (they were started
        // earliest), then the queue of runs nobody holds, oldest first.
        for pick in [
            "SELECT id FROM runs WHERE lease_owner IS NOT NULL AND lease_until < $3
                AND status IN ('pending', 'running') AND source IS NULL
             ORDER BY lease_until LIMIT 1 FOR UPDATE SKIP LOCKED",
            "SELECT id FROM runs WHERE status IN ('pending', 'running') AND lease_owner IS NULL AND NOT parked
                AND source IS NULL AND (handoff_until IS NULL OR handoff_until < $3)
             ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED",
        ] {
            let claimed: Option<(String, i64)> = sqlx::query_as(&format!(
                "WITH next AS ({pick})
                 UPDATE runs r SET lease_owner = $1, lease_until = $2, attempt = r.attempt + 1, parked = FALSE,
                    rewake = FALSE
                 FROM next WHERE r.id = next.id RETURNING r.id, r.attempt"
            ))
            .bind(owner)
            .bind(now + lease_ms)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
            if let Some((id, attempt)) = claimed {
                return Ok(Some((id, attempt as u64)));
            }
        }
        Ok(None)
    }

    async fn release(&self, fence: &Fence, park: bool) -> Result<Option<Released>> {
        let mut tx = self.pool.begin().await?;
        // The row lock is taken by the first statement, so the `rewake` read
        // is the one the update clears.
        let held: Option<(String, bool)> = sqlx::query_as(
            "SELECT status, rewake FROM runs WHERE id = $1 AND lease_owner = $2 AND attempt = $3 FOR UPDATE",
        )
        .bind(&fence.run_id)
        .bind(&fence.owner)
        .bind(fence.attempt as i64)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((status, woken)) = held else { return Ok(None) };
        sqlx::query(
            "UPDATE runs SET lease_owner = NULL, lease_until = NULL, parked = $2, rewake = FALSE,
                finished_by = CASE WHEN status IN ('done', 'failed', 'cancelled') THEN $3 ELSE finished_by END
             WHERE id = $1",
        )
        .bind(&fence.run_id)
        .bind(park && !woken)
        .bind(&fence.owner)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        let status = RunStatus::parse(&status).unwrap_or(RunStatus::Failed);
        Ok(Some(Released { status, woken }))
    }

    async fn hand_over(&self, run_id: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query("UPDATE runs SET handoff_until = NULL WHERE id = $1").bind(run_id).execute(&mut *tx).await?;
        notify_in(&mut tx, &self.channel, &Notice::Work).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn take_lost_finishes(&self, owner: &str, lease_ms: i64) -> Result<Vec<String>> {
        // Whoever finished the run (or held it when it finished) is not
        // alive any more, and a lease has passed since.
        let ids = sqlx::query_scalar(
            "UPDATE runs SET finished_by = $1 WHERE id IN (
                SELECT id FROM runs WHERE finish_unannounced AND status IN ('done', 'failed', 'cancelled')
                    AND updated_at < $2 - $3
                    AND coalesce(finished_by, lease_owner, '') NOT IN
                        (SELECT id FROM servers WHERE heartbeat_at >= $2 - $3)
                ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED)
             RETURNING id",
        )
        .bind(owner)
        .bind(now_ms())
        .bind(lease_ms)
        .fetch_all(&self.pool)
        .await?;
        Ok(ids)
    }

    async fn notify(&self, notice: &Notice) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        notify_in(&mut conn, &self.channel, notice).await
    }

    async fn listen(&self) -> Result<Notices> {
        let mut listener = PgListener::connect_with(&self.pool).await?;
        listener.listen(&self.channel).await?;
        let stream = futures::stream::unfold(listener, |mut listener| async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(n)) => match decode(n.payload()) {
                        Some(notice) => return Some((notice, listener)),
                        None => continue,
                    },
                    // The connection dropped; the next call reconnects.
                    Ok(None) => return Some((Notice::Reconnected, listener)),
                    Err(e) => {
                        tracing::warn!(error = %e, "listening for other servers failed; retrying");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(Box::pin(stream))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_round_trip() {
        for n in [
            Notice::Events { from: "s1".into(), run_id: "run_1".into(), first: 40, last: 42 },
            Notice::Cancel { run_id: "run_2".into() },
            Notice::Work,
        ] {
            assert_eq!(decode(&encode(&n)), Some(n));
        }
        assert_eq!(decode("x\tjunk"), None);
        assert_eq!(decode("e\ts1\trun"), None);
    }
}
