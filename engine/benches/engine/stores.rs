//! Where the engine bench's figures keep their databases: a SQLite file
//! each, or with `RUNLENS_BENCH_STORE=postgres` a schema each of the
//! PostgreSQL of `RUNLENS_BENCH_POSTGRES` (dropped at the end), and how many
//! bytes such a database holds.

use std::sync::Mutex;
use std::time::Duration;

/// Where a figure's database lives.
pub enum Db {
    Sqlite(std::path::PathBuf),
    /// A schema of the bench's PostgreSQL database.
    Postgres(String),
}

/// The store every figure runs on, chosen by `RUNLENS_BENCH_STORE`.
pub struct Stores {
    pub dir: tempfile::TempDir,
    pub postgres: bool,
    /// The schemas made so far (dropped at the end).
    pub schemas: Mutex<Vec<String>>,
}

impl Stores {
    pub fn new() -> Self {
        let postgres = std::env::var("RUNLENS_BENCH_STORE").is_ok_and(|s| s == "postgres");
        Stores { dir: tempfile::tempdir().unwrap(), postgres, schemas: Mutex::default() }
    }

    pub fn name(&self) -> &'static str {
        if self.postgres {
            "PostgreSQL"
        } else {
            "SQLite"
        }
    }

    /// A fresh database for the figure `name`, and its URL.
    pub fn fresh(&self, name: &str) -> (Db, String) {
        if self.postgres {
            let schema = format!("bench_engine_{}_{name}", std::process::id());
            self.schemas.lock().unwrap().push(schema.clone());
            let url = format!("{}?options[search_path]={schema}", postgres());
            (Db::Postgres(schema), url)
        } else {
            let path = self.dir.path().join(format!("{name}.db"));
            let url = format!("sqlite://{}", path.display());
            (Db::Sqlite(path), url)
        }
    }

    pub async fn drop_schemas(&self) {
        use sqlx::Connection;
        let schemas = std::mem::take(&mut *self.schemas.lock().unwrap());
        if let Ok(mut conn) = sqlx::PgConnection::connect(&postgres()).await {
            for schema in schemas {
                let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).execute(&mut conn).await;
            }
        }
    }
}

fn postgres() -> String {
    std::env::var("RUNLENS_BENCH_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// Bytes the database holds: on SQLite every page in use after a
/// checkpoint; on PostgreSQL the schema's tables with their indexes and TOAST.
pub async fn stored_bytes(db: &Db) -> u64 {
    match db {
        Db::Sqlite(path) => sqlite_bytes(path),
        Db::Postgres(schema) => {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&postgres()).await.unwrap();
            let bytes: i64 = sqlx::query_scalar(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
                 JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
            )
            .bind(schema)
            .fetch_one(&mut conn)
            .await
            .unwrap();
            bytes as u64
        }
    }
}

fn sqlite_bytes(path: &std::path::Path) -> u64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let _: (i64, i64, i64) =
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0)).unwrap();
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    ((pages - free) * size) as u64
}
