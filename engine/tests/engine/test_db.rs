//! Each test's own store, for the engine and API suites alike (both include
//! this file): SQLite (a temporary file) unless `RUNLENS_TEST_STORE=postgres`;
//! then each [`TestDb`] is a schema of its own in the PostgreSQL database
//! `RUNLENS_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/test`),
//! created by the store when first opened and dropped with the guard, so the
//! same suites hold both backends to one contract.
#![allow(dead_code)]

/// Whether the suites run against PostgreSQL (`RUNLENS_TEST_STORE=postgres`).
pub fn on_postgres() -> bool {
    std::env::var("RUNLENS_TEST_STORE").is_ok_and(|v| v == "postgres")
}

fn postgres_base() -> String {
    std::env::var("RUNLENS_TEST_POSTGRES").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A test's own store: a temporary directory (for SQLite and any other files
/// the test writes) and, on PostgreSQL, a schema dropped with the guard.
pub struct TestDb {
    dir: tempfile::TempDir,
    schema: Option<String>,
}

impl TestDb {
    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

/// A fresh store for one test (see [`TestDb`]).
pub fn test_db() -> TestDb {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let schema = on_postgres().then(|| {
        SWEPT.call_once(sweep);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
        format!("t_{}_{n}_{nanos}", std::process::id())
    });
    TestDb { dir: tempfile::tempdir().unwrap(), schema }
}

/// Drops `schemas` from a thread with a runtime of its own (the test's
/// runtime may be shutting down).
fn drop_schemas(schemas: Vec<String>) {
    let url = postgres_base();
    let _ = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            use sqlx::Connection;
            let Ok(mut conn) = sqlx::PgConnection::connect(&url).await else { return };
            let _ = sqlx::query("SET lock_timeout = '10s'").execute(&mut conn).await;
            for schema in schemas {
                let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE")).execute(&mut conn).await;
            }
        });
    })
    .join();
}

/// Drops the schemas test processes that are gone left behind (a test
/// killed, or a store still busy when its test ended).
fn sweep() {
    let url = postgres_base();
    let names = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            use sqlx::Connection;
            let mut conn = sqlx::PgConnection::connect(&url).await.ok()?;
            sqlx::query_scalar::<_, String>("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 't\\_%'")
                .fetch_all(&mut conn)
                .await
                .ok()
        })
    })
    .join()
    .ok()
    .flatten()
    .unwrap_or_default();
    let gone = |name: &String| {
        let pid = name.split('_').nth(1).unwrap_or("");
        !pid.is_empty() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    };
    drop_schemas(names.into_iter().filter(gone).collect());
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(schema) = self.schema.take() {
            drop_schemas(vec![schema]);
        }
    }
}

/// The store URL of `db`: its SQLite file, or its PostgreSQL schema.
pub fn db_url(db: &TestDb) -> String {
    match &db.schema {
        Some(schema) => format!("{}?options[search_path]={schema}", postgres_base()),
        None => sqlite_url(db),
    }
}

/// A SQLite file in `db`'s directory, for tests of the SQLite store itself.
pub fn sqlite_url(db: &TestDb) -> String {
    format!("sqlite://{}", db.path().join("runlens.db").display())
}

/// Runs raw SQL statements on the store at `url` (either backend), to put a
/// store into a state only a crash or an older version could leave.
pub async fn sql(url: &str, statements: &[&str]) {
    use sqlx::Connection;
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        for s in statements {
            sqlx::raw_sql(s).execute(&mut conn).await.unwrap();
        }
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        for s in statements {
            sqlx::raw_sql(s).execute(&mut conn).await.unwrap();
        }
    }
}

/// The text columns of the rows `query` returns from the store at `url`.
pub async fn sql_rows(url: &str, query: &str) -> Vec<Vec<String>> {
    use sqlx::{Connection, Row};
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
        let rows = sqlx::query(query).fetch_all(&mut conn).await.unwrap();
        rows.iter().map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect()).collect()
    } else {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let rows = sqlx::query(query).fetch_all(&mut conn).await.unwrap();
        rows.iter().map(|r| (0..r.len()).map(|i| r.get::<String, _>(i)).collect()).collect()
    }
}

/// Opens the store at `url` (either backend).
pub async fn open_store(url: &str) -> std::sync::Arc<dyn runlens_engine::store::Store> {
    runlens_engine::store::open(url).await.expect("open store")
}
