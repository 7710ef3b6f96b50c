//! What differs between the databases, in one place: the [`Dialect`] trait
//! and its two implementations, [`Lite`] (SQLite) and [`Pg`] (PostgreSQL).
//! The rewrite rules are listed in the module docs of `store::sql`.

use crate::error::Result;

/// One database's spelling of the store's SQL (see `store::sql`).
pub(crate) trait Dialect {
    type DB: sqlx::Database;
    /// A list of texts bound as one value, for [`Dialect::IN_LIST`].
    type List;

    /// This dialect's place among the texts a statement keeps (see `sql!`).
    const INDEX: usize;

    /// Starts a read-only transaction whose statements all read one
    /// snapshot (a deferred transaction is one in SQLite's WAL mode;
    /// PostgreSQL's READ COMMITTED gives each statement its own).
    const BEGIN_SNAPSHOT: &'static str;

    /// Starts a transaction that will write, holding the write lock from
    /// its first statement on (SQLite's `BEGIN IMMEDIATE`, taken through the
    /// busy handler; a deferred one that reads before it writes can find its
    /// snapshot stale and fail at once). PostgreSQL's plain `BEGIN`.
    const BEGIN_WRITE: &'static str;

    /// The larger of two non-NULL values (`{GREATEST}(a, b)`): PostgreSQL's
    /// `greatest` skips NULLs, SQLite's `max` returns NULL for one, so the
    /// store only calls it on values it knows are set.
    const GREATEST: &'static str;

    /// How a join is written whose tables are read in the order written (a
    /// planner hint SQLite needs, having no statistics; PostgreSQL's planner
    /// chooses for itself).
    const JOIN_IN_ORDER: &'static str;

    /// `IN` a list bound as one value (`column {IN_LIST}`, bound with
    /// [`Dialect::list`]): one statement text for any number of items.
    const IN_LIST: &'static str;

    /// Full-text search (`store::sql::search`): the pieces of `run_text`
    /// each joined to its run, a piece's key, and the condition that a piece
    /// matches the query bound between its two parts (see
    /// [`Dialect::text_query`]).
    const TEXT_FROM: &'static str;
    const TEXT_KEY: &'static str;
    const TEXT_MATCH: (&'static str, &'static str);
    /// The column of a piece's project where the query does not name it.
    const TEXT_PROJECT: Option<&'static str>;

    /// The store's text (PostgreSQL's SQL with `?` placeholders) as this
    /// database takes it.
    fn rewrite(sql: &str) -> String;

    /// The full-text query finding every one of `words` (letters and digits
    /// only, see `RunFilter::search_words`) as whole words; in `project`
    /// where the query can say so. (No word prefixes: a prefix's pieces are
    /// all merged before the first is read, 100 ms and more over a million
    /// runs, where a whole word's are read newest first and stop at a page.)
    fn text_query(words: &[String], project: Option<&str>) -> String;

    /// The query reading `(key, snippet)` of the pieces of `keys` for the
    /// full-text query `query`, the words found between `\u{2}` and `\u{3}`.
    fn snippets(query: String, keys: &[i64]) -> sqlx::QueryBuilder<'static, Self::DB>;

    /// The statement that writes `row` (`INTO table (…) VALUES (…)`) over
    /// the row it conflicts with: SQLite replaces the row, whose
    /// pending-inbox triggers count on a replace being a delete then an
    /// insert; PostgreSQL updates it in place as `conflict` says.
    fn replace_row(row: &str, conflict: &str) -> String;

    /// The JSON text or number at `path` in the JSON `column`, as SQL (NULL
    /// where the document has nothing there).
    fn json_text(column: &str, path: &[&str]) -> String;

    /// The JSON number at `key` of the JSON `column` as SQL: NULL where
    /// there is none, or where `column` is not JSON at all.
    fn json_number(column: &str, key: &str) -> String;

    /// The statement that adds the text `?1` to the JSON list `column` of
    /// run `?2` unless it is there already (SQLite's JSON functions against
    /// PostgreSQL's `jsonb` operators).
    fn add_to_json_list(column: &str) -> String;

    /// After a table in `FROM`: read it through `index` (SQLite's
    /// `INDEXED BY`; nothing on PostgreSQL, whose planner chooses).
    fn indexed_by(index: &str) -> String;

    /// Pushes onto `q` the condition that the JSON object `column` holds at
    /// `key` a string, number or boolean whose text is `value`.
    fn push_json_scalar_eq(q: &mut sqlx::QueryBuilder<'static, Self::DB>, column: &str, key: &str, value: &str);

    /// `items` as one bound value for [`Dialect::IN_LIST`].
    fn list(items: &[String]) -> Self::List;

    /// Makes the transaction on `conn` wait for every other one that
    /// serialized on `key` (until it ends), so a check then a write stays
    /// one step. On SQLite nothing: its one writer already serializes every
    /// transaction whose first statement writes.
    #[allow(async_fn_in_trait)]
    async fn serialize(conn: &mut <Self::DB as sqlx::Database>::Connection, key: &str) -> Result<()>;

    /// Like [`Dialect::serialize`] without waiting: `false` when another
    /// transaction holds `key` (it does the work); always `true` on SQLite.
    #[allow(async_fn_in_trait)]
    async fn try_serialize(conn: &mut <Self::DB as sqlx::Database>::Connection, key: &str) -> Result<bool>;
}

/// SQLite: `?` placeholders, dynamically typed columns, JSON as TEXT, one
/// writer at a time.
pub(crate) struct Lite;

impl Dialect for Lite {
    type DB = sqlx::Sqlite;
    type List = String;
    const INDEX: usize = 0;
    const BEGIN_SNAPSHOT: &'static str = "BEGIN";
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    const GREATEST: &'static str = "max";
    const JOIN_IN_ORDER: &'static str = "CROSS JOIN";
    const IN_LIST: &'static str = "IN (SELECT value FROM json_each(?))";
    // The run's rowid is the key's high bits: read through its primary key.
    const TEXT_FROM: &'static str = "run_text CROSS JOIN runs ON runs.rowid = run_text.rowid >> 28";
    const TEXT_KEY: &'static str = "run_text.rowid";
    const TEXT_MATCH: (&'static str, &'static str) = ("run_text MATCH ", "");
    const TEXT_PROJECT: Option<&'static str> = None;

    fn text_query(words: &[String], project: Option<&str>) -> String {
        // FTS5's syntax: each word a quoted string in the `body` column, the
        // project (a column of its own) one too.
        let quoted = |w: &str| format!("\"{}\"", w.replace('"', "\"\""));
        let project = project.map(|p| format!("project : {}", quoted(p)));
        let words = words.iter().map(|w| format!("body : {}", quoted(w)));
        project.into_iter().chain(words).collect::<Vec<_>>().join(" AND ")
    }

    fn snippets(query: String, keys: &[i64]) -> sqlx::QueryBuilder<'static, sqlx::Sqlite> {
        let keys = serde_json::to_string(keys).unwrap_or_default();
        let mut q = sqlx::QueryBuilder::new(
            "SELECT rowid, snippet(run_text, 1, char(2), char(3), '…', 16) FROM run_text WHERE run_text MATCH ",
        );
        q.push_bind(query).push(" AND rowid IN (SELECT value FROM json_each(").push_bind(keys).push("))");
        q
    }

    fn rewrite(sql: &str) -> String {
        rewrite(sql, Target::Lite)
    }

    fn replace_row(row: &str, _conflict: &str) -> String {
        format!("INSERT OR REPLACE {row}")
    }

    fn json_text(column: &str, path: &[&str]) -> String {
        format!("json_extract({column}, '$.{}')", path.join("."))
    }

    fn json_number(column: &str, key: &str) -> String {
        format!("CASE WHEN json_valid({column}) THEN json_extract({column}, '$.{key}') END")
    }

    fn add_to_json_list(column: &str) -> String {
        format!(
            "UPDATE runs SET {column} = json_insert({column}, '$[#]', ?1)
             WHERE id = ?2 AND NOT EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?1)"
        )
    }

    fn indexed_by(index: &str) -> String {
        format!(" INDEXED BY {index}")
    }

    fn push_json_scalar_eq(q: &mut sqlx::QueryBuilder<'static, sqlx::Sqlite>, column: &str, key: &str, value: &str) {
        let path = format!("$.\"{key}\"");
        q.push(format_args!("{column} IS NOT NULL AND (CAST(json_extract({column}, "))
            .push_bind(path.clone())
            .push(") AS TEXT) = ")
            .push_bind(value.to_owned())
            .push(format_args!(" AND json_type({column}, "))
            .push_bind(path.clone())
            .push(format_args!(") IN ('text', 'integer', 'real') OR json_type({column}, "))
            .push_bind(path)
            .push(") = ")
            .push_bind(value.to_owned())
            .push(" AND ")
            .push_bind(value.to_owned())
            .push(" IN ('true', 'false'))");
    }

    fn list(items: &[String]) -> String {
        crate::store::json_text(&items)
    }

    async fn serialize(_conn: &mut sqlx::SqliteConnection, _key: &str) -> Result<()> {
        Ok(())
    }

    async fn try_serialize(_conn: &mut sqlx::SqliteConnection, _key: &str) -> Result<bool> {
        Ok(true)
    }
}

/// PostgreSQL: `$n` placeholders; several servers write at once, each
/// transaction in READ COMMITTED.
#[cfg(feature = "postgres")]
pub(crate) struct Pg;

#[cfg(feature = "postgres")]
impl Dialect for Pg {
    type DB = sqlx::Postgres;
    type List = Vec<String>;
    const INDEX: usize = 1;
    const BEGIN_SNAPSHOT: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    const BEGIN_WRITE: &'static str = "BEGIN";
    const GREATEST: &'static str = "greatest";
    const JOIN_IN_ORDER: &'static str = "JOIN";
    const IN_LIST: &'static str = "= ANY(?)";
    const TEXT_FROM: &'static str = "run_text JOIN runs ON runs.id = run_text.run_id";
    const TEXT_KEY: &'static str = "run_text.key";
    const TEXT_MATCH: (&'static str, &'static str) = ("run_text.tsv @@ to_tsquery('simple', ", ")");
    const TEXT_PROJECT: Option<&'static str> = Some("run_text.project");

    fn text_query(words: &[String], _project: Option<&str>) -> String {
        // Letters and digits only, so quoting each word is all it needs.
        words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" & ")
    }

    fn snippets(query: String, keys: &[i64]) -> sqlx::QueryBuilder<'static, sqlx::Postgres> {
        let mut q = sqlx::QueryBuilder::new("SELECT key, ts_headline('simple', body, to_tsquery('simple', ");
        q.push_bind(query)
            .push("), 'StartSel=\u{2}, StopSel=\u{3}, MaxWords=24, MinWords=12, MaxFragments=1') FROM run_text WHERE key = ANY(")
            .push_bind(keys.to_vec())
            .push(")");
        q
    }

    fn rewrite(sql: &str) -> String {
        rewrite(sql, Target::Pg)
    }

    fn replace_row(row: &str, conflict: &str) -> String {
        format!("INSERT {row} {conflict}")
    }

    fn json_text(column: &str, path: &[&str]) -> String {
        let (last, parents) = path.split_last().expect("a JSON path has a key");
        let mut out = column.to_owned();
        for key in parents {
            out.push_str(&format!(" -> '{key}'"));
        }
        out.push_str(&format!(" ->> '{last}'"));
        out
    }

    fn json_number(column: &str, key: &str) -> String {
        format!("CASE WHEN jsonb_typeof({column} -> '{key}') = 'number' THEN ({column} ->> '{key}')::numeric END")
    }

    fn add_to_json_list(column: &str) -> String {
        format!(
            "UPDATE runs SET {column} = {column} || jsonb_build_array($1::text)
             WHERE id = $2 AND NOT ({column} @> jsonb_build_array($1::text))"
        )
    }

    fn indexed_by(_index: &str) -> String {
        String::new()
    }

    fn push_json_scalar_eq(q: &mut sqlx::QueryBuilder<'static, sqlx::Postgres>, column: &str, key: &str, value: &str) {
        // For these three types `->>` yields exactly that text.
        q.push(format_args!("jsonb_typeof({column} -> "))
            .push_bind(key.to_owned())
            .push(format_args!("::text) IN ('string', 'number', 'boolean') AND {column} ->> "))
            .push_bind(key.to_owned())
            .push("::text = ")
            .push_bind(value.to_owned());
    }

    fn list(items: &[String]) -> Vec<String> {
        items.to_vec()
    }

    async fn serialize(conn: &mut sqlx::PgConnection, key: &str) -> Result<()> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))").bind(key).execute(conn).await?;
        Ok(())
    }

    async fn try_serialize(conn: &mut sqlx::PgConnection, key: &str) -> Result<bool> {
        Ok(sqlx::query_scalar("SELECT pg_try_advisory_xact_lock(hashtext($1))").bind(key).fetch_one(conn).await?)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Target {
    Lite,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Pg,
}

/// The rewrite of `sql` for `target`: string literals and quoted names are
/// copied as they are; see the module docs of `store::sql` for the rules.
fn rewrite(sql: &str, target: Target) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16);
    let (mut i, mut n) = (0, 0);
    while i < b.len() {
        let c = b[i];
        if c == b'\'' || c == b'"' {
            let end = quoted_end(b, i);
            let before = sql[..i].trim_end();
            let collate = before.len() >= 7 && before[before.len() - 7..].eq_ignore_ascii_case("COLLATE");
            if target == Target::Lite && collate && &sql[i..end] == "\"C\"" {
                // `COLLATE "C"`: drop the word just written and the name.
                let keep = before[..before.len() - "COLLATE".len()].trim_end().len();
                out.truncate(out.len() - (i - keep));
                i = end;
                continue;
            }
            out.push_str(&sql[i..end]);
            i = end;
        } else if c == b'?' {
            let digits = b[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
            match target {
                Target::Lite => out.push_str(&sql[i..i + 1 + digits]),
                Target::Pg if digits > 0 => out.push_str(&format!("${}", &sql[i + 1..i + 1 + digits])),
                Target::Pg => {
                    n += 1;
                    out.push_str(&format!("${n}"));
                }
            }
            i += 1 + digits;
        } else if target == Target::Lite && c == b':' && b.get(i + 1) == Some(&b':') {
            i = cast_end(b, i + 2);
        } else if target == Target::Lite && word_start(b, i) && starts_with_word(&sql[i..], "FOR") {
            match lock_clause_end(sql, i) {
                Some(end) => i = end,
                None => {
                    out.push_str("FOR");
                    i += 3;
                }
            }
        } else {
            let len = utf8_len(c);
            out.push_str(&sql[i..i + len]);
            i += len;
        }
    }
    out
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// The index after the literal or quoted name opening at `start` (a quote
/// doubled inside it is part of it).
fn quoted_end(b: &[u8], start: usize) -> usize {
    let q = b[start];
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == q {
            if b.get(i + 1) == Some(&q) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    b.len()
}

fn is_word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn word_start(b: &[u8], i: usize) -> bool {
    i == 0 || !is_word(b[i - 1])
}

/// The index after a cast's type name (`text`, `bigint`, `text[]`).
fn cast_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_word(b[i]) {
        i += 1;
    }
    if b.get(i) == Some(&b'[') && b.get(i + 1) == Some(&b']') {
        i += 2;
    }
    i
}

fn starts_with_word(s: &str, word: &str) -> bool {
    s.len() >= word.len()
        && s[..word.len()].eq_ignore_ascii_case(word)
        && s.as_bytes().get(word.len()).is_none_or(|&c| !is_word(c))
}

/// The words of `s` from `at` on, each with the index after it.
fn words(s: &str, mut at: usize) -> impl Iterator<Item = (&str, usize)> + '_ {
    std::iter::from_fn(move || {
        let b = s.as_bytes();
        while at < b.len() && (b[at].is_ascii_whitespace() || b[at] == b',') {
            at += 1;
        }
        let start = at;
        while at < b.len() && is_word(b[at]) {
            at += 1;
        }
        (at > start).then(|| (&s[start..at], at))
    })
}

/// The end of a row-locking clause at `at` (`FOR UPDATE`, `FOR NO KEY
/// UPDATE`, `FOR SHARE`, then `OF t, u` and `SKIP LOCKED` or `NOWAIT`), or
/// `None` when the word `FOR` there starts something else.
fn lock_clause_end(s: &str, at: usize) -> Option<usize> {
    let mut w = words(s, at + 3).peekable();
    let (first, mut end) = w.next()?;
    if first.eq_ignore_ascii_case("NO") {
        let (key, _) = w.next()?;
        let (update, e) = w.next()?;
        if !key.eq_ignore_ascii_case("KEY") || !update.eq_ignore_ascii_case("UPDATE") {
            return None;
        }
        end = e;
    } else if !first.eq_ignore_ascii_case("UPDATE") && !first.eq_ignore_ascii_case("SHARE") {
        return None;
    }
    let mut of = false;
    while let Some(&(word, e)) = w.peek() {
        let upper = word.to_ascii_uppercase();
        match upper.as_str() {
            "OF" => of = true,
            "SKIP" | "LOCKED" | "NOWAIT" => of = false,
            _ if of => {}
            _ => break,
        }
        end = e;
        w.next();
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::{rewrite, Target};

    #[test]
    fn postgres_numbers_placeholders_in_order() {
        assert_eq!(rewrite("a = ? AND b IN (?, ?)", Target::Pg), "a = $1 AND b IN ($2, $3)");
        assert_eq!(rewrite("a = ?1 OR b = ?1 AND c = ?2", Target::Pg), "a = $1 OR b = $1 AND c = $2");
        assert_eq!(rewrite("x = '?' AND y = ?", Target::Pg), "x = '?' AND y = $1");
    }

    #[test]
    fn postgres_keeps_casts_locks_and_collations() {
        let sql = "SELECT data::text FROM t WHERE n COLLATE \"C\" > ? FOR UPDATE SKIP LOCKED";
        assert_eq!(rewrite(sql, Target::Pg), sql.replace('?', "$1"));
    }

    #[test]
    fn sqlite_drops_casts_locks_and_c_collations() {
        assert_eq!(
            rewrite("SELECT data::text AS data, sum(n)::bigint FROM t WHERE v = ?::jsonb", Target::Lite),
            "SELECT data AS data, sum(n) FROM t WHERE v = ?"
        );
        assert_eq!(
            rewrite("SELECT seq FROM t WHERE seq = ? FOR UPDATE SKIP LOCKED)", Target::Lite),
            "SELECT seq FROM t WHERE seq = ? )"
        );
        assert_eq!(
            rewrite("SELECT 1 FROM d ORDER BY d.n LIMIT ? FOR UPDATE OF d SKIP LOCKED) UPDATE", Target::Lite),
            "SELECT 1 FROM d ORDER BY d.n LIMIT ? ) UPDATE"
        );
        assert_eq!(rewrite("ORDER BY id COLLATE \"C\" DESC", Target::Lite), "ORDER BY id DESC");
        assert_eq!(rewrite("x = 'a::b' AND y = 'FOR UPDATE'", Target::Lite), "x = 'a::b' AND y = 'FOR UPDATE'");
        assert_eq!(rewrite("SELECT formula FROM fork", Target::Lite), "SELECT formula FROM fork");
    }
}
