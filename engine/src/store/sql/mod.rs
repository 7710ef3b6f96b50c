//! One SQL text per statement, for every database: the store's parts are
//! written once, against [`Db`], and a small [`Dialect`] per database says
//! what truly differs.
//!
//! A part of the store is implemented once for every backend
//! (`impl<S: SqlStore> PriceStore for S`), and each method either runs the
//! same statements on every database or, where a backend has a path of its
//! own (SQLite's hot writes on its write thread, PostgreSQL's fenced writes
//! and notifications), says so in one `match` on [`SqlStore::db`].
//!
//! The shared statements run in [`with_db!`]: its body is compiled once per
//! backend, with the backend's pool and dialect (`D`) in scope, so binds and
//! rows stay typed by the backend's own sqlx driver and nothing is decided
//! at run time but which arm runs. Statement texts go through [`sql!`],
//! which rewrites a text for `D` once per process and keeps it (a hot path
//! pays one atomic load).
//!
//! # The one text
//! Statements are written in PostgreSQL's SQL with `?` placeholders (`?1`,
//! `?2`, … where one value is used twice; never both kinds in one
//! statement). [`Dialect::rewrite`] turns that into each database's text:
//! - PostgreSQL numbers the placeholders (`$1`, `$2`, …);
//! - SQLite keeps them, and drops what its engine has no use for: casts
//!   (`x::text`, `?::jsonb`: its columns are dynamically typed, JSON is
//!   TEXT), row-locking clauses (`FOR UPDATE [OF t] [SKIP LOCKED]`: a
//!   SQLite database has one writer at a time, so a transaction that writes
//!   first holds every row it reads) and `COLLATE "C"` (PostgreSQL's
//!   default collation follows a locale; SQLite's only order is bytewise,
//!   which is what `"C"` asks for).
//!
//! What the rewrite cannot express is a member of [`Dialect`]: JSON paths
//! ([`Dialect::json_text`]), lists bound as one value ([`Dialect::list`]),
//! serializing transactions ([`Dialect::serialize`]: PostgreSQL takes an
//! advisory lock, SQLite's single writer already is one, so a transaction
//! there still writes first) and a read of several statements in one
//! snapshot ([`Dialect::BEGIN_SNAPSHOT`]). Where a backend keeps a path of
//! its own for speed or safety, the `match` on [`Db`] says so.
//!
//! # A third backend
//! A third database is a dialect, not a third copy of the store:
//! 1. its store type in `store/<backend>/` (open, migrate, its pool) with
//!    [`SqlStore`] implemented, and its migrations in `migrations/<backend>/`;
//! 2. a variant of [`Db`] and an arm of [`with_db!`];
//! 3. an implementation of [`Dialect`] (its placeholders and whatever of
//!    PostgreSQL's syntax it spells otherwise) and of [`RowWrites`] (how it
//!    writes a run's rows inside a transaction);
//! 4. the arms of the few `match`es on [`Db`] where a backend has a path of
//!    its own (the compiler lists them), usually the shared statements again.
//!
//! Then the engine and API suites run on it (`RUNLENS_TEST_STORE`).

use std::future::Future;
use std::sync::OnceLock;

use crate::error::Result;
use crate::model::{Message, Run, Step, ToolCall};
#[cfg(feature = "postgres")]
use crate::store::PgStore;
use crate::store::{
    AgentStore, ClusterStore, Directory, HttpToolStore, RequestStore, SpanStore, SqliteStore, Store, WebhookStore,
};

mod agents;
mod approvals;
pub(crate) mod columns;
mod conversation;
mod datasets;
pub(crate) mod decide;
mod dialect;
mod directory;
mod evaluators;
mod events;
mod experiments;
mod grants;
mod http_tools;
mod list;
mod recovery;
mod requests;
mod retention;
mod reviews;
mod runs;
mod scores;
mod search;
mod secrets;
mod sessions;
mod sign_ins;
pub(crate) mod spans;
mod steps;
mod trees;
mod webhook_reads;
mod webhooks;
pub(crate) mod writes;

pub(crate) use approvals::inbox_query;
#[cfg(feature = "postgres")]
pub(crate) use dialect::Pg;
pub(crate) use dialect::{Dialect, Lite};
pub(crate) use list::list_query;
pub(crate) use runs::transition_refused;

/// A store whose parts are written once in [`with_db!`]: its backend.
pub(crate) trait SqlStore: Send + Sync + 'static {
    fn db(&self) -> Db<'_>;
}

/// Which database a store keeps its rows in, with its store for the paths
/// that are the backend's own.
#[derive(Clone, Copy)]
pub(crate) enum Db<'a> {
    Sqlite(&'a SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(&'a PgStore),
}

impl SqlStore for SqliteStore {
    fn db(&self) -> Db<'_> {
        Db::Sqlite(self)
    }
}

#[cfg(feature = "postgres")]
impl SqlStore for PgStore {
    fn db(&self) -> Db<'_> {
        Db::Postgres(self)
    }
}

impl<S: SqlStore> Store for S {
    fn directory(&self) -> &dyn Directory {
        self
    }

    fn agents(&self) -> &dyn AgentStore {
        self
    }

    fn webhooks(&self) -> &dyn WebhookStore {
        self
    }

    fn http_tools(&self) -> &dyn HttpToolStore {
        self
    }

    fn spans(&self) -> &dyn SpanStore {
        self
    }

    fn requests(&self) -> &dyn RequestStore {
        self
    }

    fn trees(&self) -> &dyn crate::store::TreeStore {
        self
    }

    fn scores(&self) -> &dyn crate::store::ScoreStore {
        self
    }

    fn datasets(&self) -> &dyn crate::store::DatasetStore {
        self
    }

    fn experiments(&self) -> &dyn crate::store::ExperimentStore {
        self
    }

    fn evaluators(&self) -> &dyn crate::store::EvaluatorStore {
        self
    }

    fn reviews(&self) -> &dyn crate::store::ReviewStore {
        self
    }

    fn cluster(&self) -> Option<&dyn ClusterStore> {
        match self.db() {
            // One server: nothing to share.
            Db::Sqlite(_) => None,
            #[cfg(feature = "postgres")]
            Db::Postgres(store) => Some(store),
        }
    }
}

/// `body` with `pool` the backend's connection pool and `D` its
/// [`Dialect`], compiled once per backend (see the module docs):
/// `with_db!(self.db(), |pool, D| { sqlx::query(sql!(D, "…")).execute(pool).await })`.
macro_rules! with_db {
    ($db:expr, |$pool:ident, $d:ident| $body:expr) => {
        match $db {
            $crate::store::sql::Db::Sqlite(store) => {
                #[allow(dead_code)]
                type $d = $crate::store::sql::Lite;
                let $pool = store.pool();
                $body
            }
            #[cfg(feature = "postgres")]
            $crate::store::sql::Db::Postgres(store) => {
                #[allow(dead_code)]
                type $d = $crate::store::sql::Pg;
                let $pool = store.pool();
                $body
            }
        }
    };
}
pub(crate) use with_db;

/// The text `text` (any `AsRef<str>`, evaluated once per dialect) as
/// dialect `D` takes it, rewritten on first use and kept for the process:
/// a `&'static str`. Each call site keeps one text per dialect, so a call
/// in code generic over the dialect is as right as one in [`with_db!`].
macro_rules! sql {
    ($d:ty, $text:expr $(,)?) => {{
        static TEXTS: $crate::store::sql::Texts = $crate::store::sql::Texts::new();
        TEXTS.get::<$d>(|| <$d as $crate::store::sql::Dialect>::rewrite(::std::convert::AsRef::<str>::as_ref(&$text)))
    }};
}
pub(crate) use sql;

/// In write transaction `$tx` (serialized on the project): `None` when
/// table `$table` has room for one more row of `$project` named `$name`
/// under its cap of `$max` rows, else why not (a
/// [`crate::store::CappedInsert`]). For the named things a project holds
/// a bounded number of (evaluators, review queues).
macro_rules! capped_named_room {
    ($tx:expr, $d:ty, $table:literal, $project:expr, $name:expr, $max:expr) => {{
        let (count, named): (i64, i64) = sqlx::query_as(sql!(
            $d,
            concat!(
                "SELECT count(*), coalesce(sum(CASE WHEN name = ? THEN 1 ELSE 0 END), 0)::bigint FROM ",
                $table,
                " WHERE project = ?"
            )
        ))
        .bind($name)
        .bind($project)
        .fetch_one(&mut *$tx)
        .await?;
        if named > 0 {
            Some($crate::store::CappedInsert::NameTaken)
        } else if count >= i64::from($max) {
            Some($crate::store::CappedInsert::Full)
        } else {
            None
        }
    }};
}
pub(crate) use capped_named_room;

/// Binds encoded columns (`store::rows::params::Column`) to sqlx query
/// `$q`, in order, keeping each NULL's type.
macro_rules! bind_columns {
    ($q:expr, $columns:expr) => {{
        use $crate::store::rows::params::Column;
        let mut q = $q;
        for v in $columns {
            q = match v {
                Column::Int(i) => q.bind(i),
                Column::Bool(b) => q.bind(b),
                Column::Text(t) => q.bind(t),
                Column::NullInt => q.bind(None::<i64>),
                Column::NullText => q.bind(None::<String>),
            };
        }
        q
    }};
}
pub(crate) use bind_columns;

/// The dialects a statement can be written for: SQLite's and PostgreSQL's.
const DIALECTS: usize = 2;

/// One statement's text for each dialect (see [`sql!`]).
pub(crate) struct Texts([OnceLock<String>; DIALECTS]);

impl Texts {
    pub(crate) const fn new() -> Self {
        Self([const { OnceLock::new() }; DIALECTS])
    }

    /// The text for `D`, made by `rewrite` the first time.
    pub(crate) fn get<D: Dialect>(&'static self, rewrite: impl FnOnce() -> String) -> &'static str {
        self.0[D::INDEX].get_or_init(rewrite)
    }
}

/// Whether `e` is a unique-key violation, on any database.
pub(crate) fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.is_unique_violation())
}

/// A connection of dialect `D`'s database.
pub(crate) type Conn<D> = <<D as Dialect>::DB as sqlx::Database>::Connection;

/// How the rows of a run's history are written inside a transaction: one
/// body for every backend (see `writes`). Each takes the open connection of
/// a transaction; committing is the caller's.
pub(crate) trait RowWrites: Dialect {
    /// Inserts the full run row (and its tags); `false` when the id exists.
    fn insert_run_row<'a>(conn: &'a mut Conn<Self>, run: &'a Run) -> impl Future<Output = Result<bool>> + Send + 'a;
    /// Appends a message; a `seq` the run already has is an error.
    fn insert_message<'a>(conn: &'a mut Conn<Self>, m: &'a Message) -> impl Future<Output = Result<()>> + Send + 'a;
    /// Writes a step row (insert or replace).
    fn upsert_step<'a>(conn: &'a mut Conn<Self>, s: &'a Step) -> impl Future<Output = Result<()>> + Send + 'a;
    /// Writes a tool call row at `pos` in its step (insert or replace).
    fn upsert_tool_call<'a>(
        conn: &'a mut Conn<Self>,
        c: &'a ToolCall,
        pos: usize,
    ) -> impl Future<Output = Result<()>> + Send + 'a;
}

/// Inserts the run row with its messages and steps (see
/// [`RowWrites::insert_run_row`]); `false`, with nothing written, when the
/// id exists.
pub(crate) async fn insert_history<D: RowWrites>(
    conn: &mut Conn<D>,
    run: &Run,
    messages: &[Message],
    steps: &[Step],
) -> Result<bool> {
    if !D::insert_run_row(conn, run).await? {
        return Ok(false);
    }
    for m in messages {
        D::insert_message(conn, m).await?;
    }
    for step in steps {
        D::upsert_step(conn, step).await?;
        for (pos, c) in step.tool_calls.iter().enumerate() {
            D::upsert_tool_call(conn, c, pos).await?;
        }
    }
    Ok(true)
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::{Dialect, Lite, Pg};

    /// One call site, generic over the dialect.
    fn text<D: Dialect>() -> &'static str {
        sql!(D, "SELECT data::text FROM t WHERE a = ? AND b = ?")
    }

    #[test]
    fn one_call_site_keeps_a_text_per_dialect() {
        assert_eq!(text::<Lite>(), "SELECT data FROM t WHERE a = ? AND b = ?");
        assert_eq!(text::<Pg>(), "SELECT data::text FROM t WHERE a = $1 AND b = $2");
        assert_eq!(text::<Lite>(), "SELECT data FROM t WHERE a = ? AND b = ?");
    }
}
