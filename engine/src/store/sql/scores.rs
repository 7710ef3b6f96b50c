//! [`ScoreStore`] for every backend: the `scores` table. The cap on a run's
//! scores is a count after the insert, in the same transaction, with the
//! inserts into one run taking turns ([`Dialect::serialize`]), as the HTTP
//! tools' cap is.

use async_trait::async_trait;

use super::{sql, with_db, Dialect, SqlStore};
use crate::error::Result;
use crate::model::{Actor, Score, ScoreSource, ScoreSummary, ScoreValue};
use crate::store::scores::{ScoreInsert, ScoreStore};
use crate::store::{from_ms, json_text, to_ms};

const COLUMNS: &str =
    "id, run_id, step_index, call_id, name, value, comment, source, author_id, author, scorer, label, judge_run_id,
     created_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    run_id: String,
    step_index: Option<i64>,
    call_id: Option<String>,
    name: String,
    value: String,
    comment: Option<String>,
    source: String,
    author_id: String,
    author: String,
    scorer: Option<String>,
    label: Option<String>,
    judge_run_id: Option<String>,
    created_at: i64,
}

impl From<Row> for Score {
    fn from(r: Row) -> Score {
        Score {
            id: r.id,
            run_id: r.run_id,
            step_index: r.step_index.and_then(|s| u32::try_from(s).ok()),
            call_id: r.call_id,
            name: r.name,
            // A row this store wrote always decodes; a damaged one says so.
            value: serde_json::from_str(&r.value).unwrap_or_else(|_| ScoreValue::Label("(unreadable)".into())),
            comment: r.comment,
            source: ScoreSource::parse(&r.source).unwrap_or(ScoreSource::Api),
            author: Actor { id: r.author_id, name: r.author },
            scorer: r.scorer,
            label: r.label,
            judge_run_id: r.judge_run_id,
            created_at: from_ms(r.created_at),
        }
    }
}

#[async_trait]
impl<S: SqlStore> ScoreStore for S {
    async fn insert_score(&self, project: &str, s: &Score, max: u32, once: bool) -> Result<ScoreInsert> {
        with_db!(self.db(), |pool, D| {
            let mut tx = pool.begin_with(D::BEGIN_WRITE).await?;
            D::serialize(&mut tx, &format!("runlens.scores:{}", s.run_id)).await?;
            if once {
                let had: Option<String> = sqlx::query_scalar(sql!(
                    D,
                    "SELECT id FROM scores WHERE run_id = ? AND source = 'scorer' AND name = ? LIMIT 1"
                ))
                .bind(&s.run_id)
                .bind(&s.name)
                .fetch_optional(&mut *tx)
                .await?;
                if had.is_some() {
                    return Ok(ScoreInsert::Already);
                }
            }
            sqlx::query(sql!(
                D,
                "INSERT INTO scores (id, project, run_id, step_index, call_id, name, value, number, comment, source,
                    author_id, author, scorer, label, judge_run_id, created_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            ))
            .bind(&s.id)
            .bind(project)
            .bind(&s.run_id)
            .bind(s.step_index.map(i64::from))
            .bind(&s.call_id)
            .bind(&s.name)
            .bind(json_text(&s.value))
            .bind(s.value.as_number())
            .bind(&s.comment)
            .bind(s.source.as_str())
            .bind(&s.author.id)
            .bind(&s.author.name)
            .bind(&s.scorer)
            .bind(&s.label)
            .bind(&s.judge_run_id)
            .bind(to_ms(s.created_at))
            .execute(&mut *tx)
            .await?;
            let count: i64 = sqlx::query_scalar(sql!(D, "SELECT count(*) FROM scores WHERE run_id = ?"))
                .bind(&s.run_id)
                .fetch_one(&mut *tx)
                .await?;
            if count > i64::from(max) {
                // Dropping the transaction rolls the insert back.
                return Ok(ScoreInsert::Full);
            }
            tx.commit().await?;
            Ok(ScoreInsert::Kept)
        })
    }

    async fn run_scores(&self, run_id: &str, limit: u32) -> Result<Vec<Score>> {
        with_db!(self.db(), |pool, D| {
            let rows = sqlx::query_as::<_, Row>(sql!(
                D,
                format!("SELECT {COLUMNS} FROM scores WHERE run_id = ? ORDER BY created_at, id LIMIT ?")
            ))
            .bind(run_id)
            .bind(i64::from(limit))
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Score::from).collect())
        })
    }

    async fn summaries_of_runs(&self, project: &str, run_ids: &[String]) -> Result<Vec<(String, ScoreSummary)>> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        with_db!(self.db(), |pool, D| {
            let rows: Vec<(String, String, i64, Option<f64>, i64, i64)> = sqlx::query_as(sql!(
                D,
                format!(
                    "SELECT run_id, name, count(*), avg(number),
                        sum(CASE WHEN value = 'true' THEN 1 ELSE 0 END),
                        sum(CASE WHEN value = 'false' THEN 1 ELSE 0 END)
                     FROM scores WHERE project = ? AND run_id {} GROUP BY run_id, name ORDER BY run_id, name",
                    D::IN_LIST
                )
            ))
            .bind(project)
            .bind(D::list(run_ids))
            .fetch_all(pool)
            .await?;
            let count = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
            Ok(rows
                .into_iter()
                .map(|(run_id, name, n, mean, yes, no)| {
                    let summary = ScoreSummary {
                        name,
                        count: count(n),
                        mean,
                        labels: Vec::new(),
                        yes: count(yes),
                        no: count(no),
                    };
                    (run_id, summary)
                })
                .collect())
        })
    }

    async fn score(&self, project: &str, id: &str) -> Result<Option<Score>> {
        with_db!(self.db(), |pool, D| {
            let row =
                sqlx::query_as::<_, Row>(sql!(D, format!("SELECT {COLUMNS} FROM scores WHERE project = ? AND id = ?")))
                    .bind(project)
                    .bind(id)
                    .fetch_optional(pool)
                    .await?;
            Ok(row.map(Score::from))
        })
    }

    async fn delete_score(&self, project: &str, id: &str) -> Result<bool> {
        with_db!(self.db(), |pool, D| {
            let n = sqlx::query(sql!(D, "DELETE FROM scores WHERE project = ? AND id = ?"))
                .bind(project)
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected();
            Ok(n == 1)
        })
    }
}
