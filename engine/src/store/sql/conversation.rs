//! Conversation writes for every backend: follow-ups, runs created with
//! their history and blobs (forks, imports), the fork family tree, and blobs
//! (BLOB in SQLite, BYTEA in PostgreSQL).

use super::columns::RUN_COLUMNS;
use super::{insert_history, sql, with_db, Db, Dialect, RowWrites};
use crate::error::{EngineError, Result};
use crate::model::{FamilyMember, Message, MessageBody, Run, RunStatus};
use crate::store::json_text;
use crate::store::rows::RunRow;
use crate::store::{from_ms, to_ms, Blob, HistoryInsert, HistoryWrite, RunOverrides};
use chrono::Utc;

/// Reopens a `done`, interactive run with a new human message, applying
/// overrides, in one transaction; `None` when the run is not in that state.
///
/// The reopening is one conditional UPDATE: a concurrent follow-up of the
/// same run waits on the row lock, then finds it `running` and gets `None`,
/// so the run is reopened (and the message appended) exactly once.
pub(super) async fn follow_up(
    db: Db<'_>,
    run_id: &str,
    text: &str,
    o: &RunOverrides,
) -> Result<Option<(Run, Message)>> {
    RunStatus::Done.check(RunStatus::Running)?;
    let now = to_ms(Utc::now());
    with_db!(db, |pool, D| {
        let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
        let row = sqlx::query_as::<_, RunRow>(sql!(
            D,
            format!(
                "UPDATE runs SET status = 'running', updated_at = ?1::bigint, finished_at = NULL,
            always_approve = '[]'::jsonb,
            idle_ms = idle_ms + CASE WHEN finished_at IS NOT NULL AND ?1::bigint > finished_at
                THEN ?1::bigint - finished_at ELSE 0 END,
            max_turns = COALESCE(?2::bigint, max_turns), tools = COALESCE(?3::jsonb, tools),
            model = COALESCE(?4::text, model)
         WHERE id = ?5 AND status = 'done' AND interactive RETURNING {RUN_COLUMNS}"
            )
        ))
        .bind(now)
        .bind(o.max_turns.map(i64::from))
        .bind(o.tools.as_ref().map(json_text))
        .bind(&o.model)
        .bind(run_id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        // The conversation goes on: an "always" granted for what came before
        // does not cover what the new message asks for.
        sqlx::query(sql!(D, crate::store::grants::END_RUN_GRANTS)).bind(now).bind(run_id).execute(&mut *tx).await?;
        let seq: i64 = sqlx::query_scalar(sql!(D, "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE run_id = ?"))
            .bind(run_id)
            .fetch_one(&mut *tx)
            .await?;
        let message = Message {
            id: format!("{run_id}-m{seq}"),
            run_id: run_id.to_owned(),
            seq: seq as u64,
            step_index: None,
            created_at: from_ms(now),
            body: MessageBody::Human { message: text.to_owned() },
        };
        D::insert_message(&mut tx, &message).await?;
        tx.commit().await?;
        Ok(Some((row.into(), message)))
    })
}

const MEMBER_SELECT: &str =
    "SELECT id, name, status, parent_run_id, forked_from_message_id, forked_from_step, replay::text AS replay, \
     created_at FROM runs";

#[derive(sqlx::FromRow)]
struct MemberRow {
    id: String,
    name: String,
    status: String,
    parent_run_id: Option<String>,
    forked_from_message_id: Option<String>,
    forked_from_step: Option<i64>,
    replay: Option<String>,
    created_at: i64,
}

/// The run's root ancestor and every run forked from it, oldest first.
/// Only forks count: a child run (started by an agent call, with a
/// `parent_call_id`) is part of its parent's tree of runs, not its family.
pub(super) async fn family(db: Db<'_>, run_id: &str) -> Result<Vec<FamilyMember>> {
    let rows = with_db!(db, |pool, D| {
        let mut root = run_id.to_owned();
        for _ in 0..1000 {
            let parent: Option<Option<String>> = sqlx::query_scalar(sql!(
                D,
                "SELECT CASE WHEN parent_call_id IS NULL THEN parent_run_id END FROM runs WHERE id = ?",
            ))
            .bind(&root)
            .fetch_optional(pool)
            .await?;
            match parent.flatten() {
                Some(p) => root = p,
                None => break,
            }
        }
        let mut rows: Vec<MemberRow> =
            sqlx::query_as(sql!(D, format!("{MEMBER_SELECT} WHERE id = ?"))).bind(&root).fetch_all(pool).await?;
        let mut frontier = vec![root];
        while !frontier.is_empty() && rows.len() < 10_000 {
            let mut next = Vec::new();
            for parent in &frontier {
                let children: Vec<MemberRow> = sqlx::query_as(sql!(
                    D,
                    format!("{MEMBER_SELECT} WHERE parent_run_id = ? AND parent_call_id IS NULL ORDER BY created_at")
                ))
                .bind(parent)
                .fetch_all(pool)
                .await?;
                next.extend(children.iter().map(|c| c.id.clone()));
                rows.extend(children);
            }
            frontier = next;
        }
        rows
    });
    let mut members = Vec::with_capacity(rows.len());
    for r in rows {
        let forked_message = match (&r.parent_run_id, &r.forked_from_message_id) {
            (Some(parent), Some(msg)) => forked_text(db, &r.id, parent, msg).await?,
            _ => None,
        };
        members.push(FamilyMember {
            status: RunStatus::parse(&r.status).unwrap_or(RunStatus::Failed),
            created_at: from_ms(r.created_at),
            id: r.id,
            name: r.name,
            parent_run_id: r.parent_run_id,
            forked_from_message_id: r.forked_from_message_id,
            forked_message,
            forked_from_step: r.forked_from_step.map(|s| s.clamp(0, u32::MAX.into()) as u32),
            replay: r.replay.and_then(|t| serde_json::from_str::<crate::model::Replay>(&t).ok()).map(|r| r.mode),
        });
    }
    members.sort_by_key(|m| m.created_at);
    Ok(members)
}

/// The text of the fork's edited message (at the seq of the parent's message).
async fn forked_text(db: Db<'_>, fork: &str, parent: &str, message_id: &str) -> Result<Option<String>> {
    // `LIMIT 1`: PostgreSQL refuses a scalar subquery of several rows where
    // SQLite takes the first (message ids are not unique by constraint).
    let data: Option<String> = with_db!(db, |pool, D| {
        sqlx::query_scalar(sql!(
            D,
            "SELECT data::text FROM messages WHERE run_id = ?
           AND seq = (SELECT seq FROM messages WHERE run_id = ? AND id = ? ORDER BY seq LIMIT 1)",
        ))
        .bind(fork)
        .bind(parent)
        .bind(message_id)
        .fetch_optional(pool)
        .await?
    });
    Ok(data
        .and_then(|d| serde_json::from_str::<serde_json::Value>(&d).ok())
        .and_then(|v| v["message"].as_str().map(str::to_owned)))
}

/// One transaction for the run, its history, its blobs and the copied
/// blobs; dropped (rolled back) on any error or refusal.
///
/// Blob ids are claimed with `ON CONFLICT (id) DO NOTHING`: an id another
/// transaction is inserting at the same time waits for it and then counts
/// as taken, never as a unique-violation error.
pub(super) async fn insert_run_with_blobs(db: Db<'_>, w: HistoryWrite<'_>) -> Result<HistoryInsert> {
    with_db!(db, |pool, D| {
        let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
        if !insert_history::<D>(&mut tx, w.run, w.messages, w.steps).await? {
            return Ok(HistoryInsert::RunExists);
        }
        for b in w.blobs {
            let inserted = sqlx::query(sql!(D, format!("{INSERT_BLOB} ON CONFLICT (id) DO NOTHING")))
                .bind(&b.id)
                .bind(&b.run_id)
                .bind(&b.call_id)
                .bind(&b.content_type)
                .bind(b.data.len() as i64)
                .bind(&b.data)
                .bind(to_ms(b.created_at))
                .execute(&mut *tx)
                .await?;
            if inserted.rows_affected() == 0 {
                return Ok(HistoryInsert::BlobTaken(b.id.clone()));
            }
        }
        for c in w.copies {
            let copied = sqlx::query(sql!(
                D,
                "INSERT INTO blobs (id, run_id, call_id, content_type, size, data, created_at)
                 SELECT ?, ?, call_id, content_type, size, data, created_at FROM blobs WHERE id = ?
                 ON CONFLICT (id) DO NOTHING"
            ))
            .bind(&c.to)
            .bind(&w.run.id)
            .bind(&c.from)
            .execute(&mut *tx)
            .await?;
            if copied.rows_affected() == 0 {
                // Nothing copied: the new id is taken, or the source is missing.
                let taken: Option<i32> = sqlx::query_scalar(sql!(D, "SELECT 1 FROM blobs WHERE id = ?"))
                    .bind(&c.to)
                    .fetch_optional(&mut *tx)
                    .await?;
                if taken.is_some() {
                    return Ok(HistoryInsert::BlobTaken(c.to.clone()));
                }
                tracing::warn!(run_id = %w.run.id, blob = %c.from, "a blob to copy is missing; its reference dangles");
            }
        }
        tx.commit().await?;
        Ok(HistoryInsert::Inserted)
    })
}

/// A blob's seven columns, in the order both blob inserts bind them. (The
/// inserts differ on purpose: an import refuses a taken id, a resumed step
/// replaces its own.)
const INSERT_BLOB: &str = "INSERT INTO blobs (id, run_id, call_id, content_type, size, data, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?)";

/// Stores a blob, replacing one of the same run (a resumed step stores its
/// result again); an id another run owns is refused.
pub(super) async fn insert_blob(db: Db<'_>, b: &Blob) -> Result<()> {
    let written = with_db!(db, |pool, D| {
        sqlx::query(sql!(
            D,
            format!(
                "{INSERT_BLOB}
                 ON CONFLICT (id) DO UPDATE SET call_id = excluded.call_id, content_type = excluded.content_type,
                    size = excluded.size, data = excluded.data, created_at = excluded.created_at
                 WHERE blobs.run_id = excluded.run_id"
            )
        ))
        .bind(&b.id)
        .bind(&b.run_id)
        .bind(&b.call_id)
        .bind(&b.content_type)
        .bind(b.data.len() as i64)
        .bind(&b.data)
        .bind(to_ms(b.created_at))
        .execute(pool)
        .await?
        .rows_affected()
    });
    if written == 0 {
        return Err(EngineError::Conflict(format!("blob id `{}` belongs to another run", b.id)));
    }
    Ok(())
}

#[derive(sqlx::FromRow)]
struct BlobRow {
    id: String,
    run_id: String,
    call_id: Option<String>,
    content_type: String,
    data: Vec<u8>,
    created_at: i64,
}

impl From<BlobRow> for Blob {
    fn from(r: BlobRow) -> Blob {
        Blob {
            id: r.id,
            run_id: r.run_id,
            call_id: r.call_id,
            content_type: r.content_type,
            data: r.data,
            created_at: from_ms(r.created_at),
        }
    }
}

pub(super) async fn get_blob(db: Db<'_>, id: &str) -> Result<Option<Blob>> {
    let row: Option<BlobRow> = with_db!(db, |pool, D| {
        sqlx::query_as(sql!(D, "SELECT id, run_id, call_id, content_type, data, created_at FROM blobs WHERE id = ?"))
            .bind(id)
            .fetch_optional(pool)
            .await?
    });
    Ok(row.map(Blob::from))
}

pub(super) async fn run_blobs(db: Db<'_>, run_id: &str) -> Result<Vec<Blob>> {
    let rows: Vec<BlobRow> = with_db!(db, |pool, D| {
        sqlx::query_as(sql!(
            D,
            "SELECT id, run_id, call_id, content_type, data, created_at FROM blobs WHERE run_id = ?
             ORDER BY id COLLATE \"C\""
        ))
        .bind(run_id)
        .fetch_all(pool)
        .await?
    });
    Ok(rows.into_iter().map(Blob::from).collect())
}
