//! Full-text search across a project's runs (`q` on the runs list), on
//! SQLite's FTS5 and PostgreSQL's `tsvector`.
//!
//! Triggers keep one `run_text` row per searchable piece of a run (see the
//! `run_search` migrations), keyed so that the key's high bits are the run's
//! place in insertion order and the low 28 bits the piece's place in the run.
//! A search reads the matching pieces newest key first, joined to their runs
//! and every other filter of the list, and keeps each run's first (newest)
//! piece until the page is full: it stops after a page of runs, or after
//! [`MAX_SEARCH_SCAN`] pieces (a page that ends early still has its
//! cursor), so a word found in every run costs no more than a rare one. An
//! `offset` passes over that many matching runs within the same budget. The
//! snippets are then made for the page's pieces only.

use std::collections::HashMap;

use futures::TryStreamExt;
use sqlx::{Database, Encode, QueryBuilder, Type};

use super::list::push_conditions;
use super::{sql, with_db, Db, Dialect};
use crate::error::{EngineError, Result};
use crate::model::{MatchedIn, Run, RunFilter, RunPage, SearchMatch, SnippetPart};
use crate::store::rows::RunRow;

/// The most matching pieces one page reads.
pub(crate) const MAX_SEARCH_SCAN: i64 = 5_000;

/// How many bits of a key place a piece in its run.
const PIECE_BITS: u32 = 28;

/// Where the piece of `key` is in its run (the layout of the migrations).
fn place(key: i64) -> (MatchedIn, Option<u32>) {
    let piece = key & ((1 << PIECE_BITS) - 1);
    let place = (piece & ((1 << 26) - 1)) as u32;
    match piece >> 26 {
        0 => (MatchedIn::Run, None),
        1 => (MatchedIn::Answer, Some(place)),
        2 => (MatchedIn::ToolCall, Some(place >> 8)),
        _ => (MatchedIn::Message, None),
    }
}

/// A search page's cursor: the place of its last run (`t<seq>`).
fn encode_cursor(key: i64) -> String {
    format!("t{}", key >> PIECE_BITS)
}

/// Whether `cursor` has the shape of a search page's cursor.
pub(crate) fn is_search_cursor(cursor: &str) -> bool {
    cursor.strip_prefix('t').is_some_and(|seq| !seq.is_empty() && seq.bytes().all(|b| b.is_ascii_digit()))
}

fn decode_cursor(cursor: &str) -> Result<i64> {
    cursor
        .strip_prefix('t')
        .and_then(|seq| seq.parse::<i64>().ok())
        .filter(|seq| (0..1 << (63 - PIECE_BITS)).contains(seq))
        .map(|seq| seq << PIECE_BITS)
        .ok_or_else(|| {
            EngineError::Invalid(format!("invalid cursor `{cursor}` (a search's cursor is `t` and a number)"))
        })
}

/// The matching pieces of `f`'s search, newest first, with their runs' ids:
/// at most [`MAX_SEARCH_SCAN`].
fn pieces_query<D: Dialect>(f: &RunFilter, query: String) -> Result<QueryBuilder<'static, D::DB>>
where
    <D::DB as Database>::Arguments<'static>: Default,
    String: Encode<'static, D::DB> + Type<D::DB>,
    &'static str: Encode<'static, D::DB> + Type<D::DB>,
    i64: Encode<'static, D::DB> + Type<D::DB>,
{
    let mut q = QueryBuilder::<D::DB>::new(format!(
        "SELECT {key}, runs.id FROM {from} WHERE {matches}",
        key = D::TEXT_KEY,
        from = D::TEXT_FROM,
        matches = D::TEXT_MATCH.0
    ));
    q.push_bind(query).push(D::TEXT_MATCH.1);
    if let (Some(column), Some(project)) = (D::TEXT_PROJECT, &f.project) {
        q.push(format_args!(" AND {column} = ")).push_bind(project.clone());
    }
    if let Some(tag) = &f.tag {
        let (k, v) = tag.split_once(':').ok_or_else(|| EngineError::Invalid("tag filter must be key:value".into()))?;
        q.push(" AND EXISTS (SELECT 1 FROM run_tags t WHERE t.run_id = runs.id AND t.key = ")
            .push_bind(k.to_owned())
            .push(" AND t.value = ")
            .push_bind(v.to_owned())
            .push(")");
    }
    push_conditions::<D>(&mut q, f)?;
    if let Some(cursor) = &f.cursor {
        q.push(format_args!(" AND {} < ", D::TEXT_KEY)).push_bind(decode_cursor(cursor)?);
    }
    q.push(format_args!(" ORDER BY {} DESC LIMIT ", D::TEXT_KEY)).push_bind(MAX_SEARCH_SCAN);
    Ok(q)
}

/// One page of `f`'s search for `words`: `limit` runs, newest first, each
/// with where it matched.
pub(crate) async fn search_runs(db: Db<'_>, f: &RunFilter, words: &[String], limit: usize) -> Result<RunPage> {
    if f.cursor.as_deref().is_some_and(|c| !c.is_empty() && !is_search_cursor(c)) {
        // The plain list's cursor: no page of this search follows it (as the
        // list treats a search's cursor).
        return Ok(RunPage::default());
    }
    if words.is_empty() {
        // No letter or digit to look for: nothing is found (a bad cursor is still said).
        if let Some(cursor) = &f.cursor {
            decode_cursor(cursor)?;
        }
        return Ok(RunPage::default());
    }
    // The page's runs in order, each with its newest matching piece.
    let mut hits: Vec<(i64, String)> = Vec::with_capacity(limit + 1);
    let mut scanned = 0i64;
    // `offset` matching runs are passed over first; the newest piece passed.
    let mut to_skip = f.offset.unwrap_or(0);
    let mut last_skipped: Option<i64> = None;
    // The database's full-text query, for the pieces and their snippets.
    let query = with_db!(db, |_pool, D| D::text_query(words, f.project.as_deref()));
    with_db!(db, |pool, D| {
        let mut q = pieces_query::<D>(f, query.clone())?;
        let mut rows = q.build_query_as::<(i64, String)>().fetch(pool);
        let run_of = |k: i64| k >> PIECE_BITS;
        let mut last_run: Option<i64> = None;
        while let Some((key, run_id)) = rows.try_next().await? {
            scanned += 1;
            if last_run == Some(run_of(key)) {
                continue;
            }
            last_run = Some(run_of(key));
            if to_skip > 0 {
                to_skip -= 1;
                last_skipped = Some(key);
                continue;
            }
            if hits.len() == limit {
                // One more run: the page is full and has a next one.
                hits.push((key, run_id));
                break;
            }
            hits.push((key, run_id));
        }
    });
    let more = hits.len() > limit;
    hits.truncate(limit);
    // A page cut short by the scan budget goes on after its last run (or
    // the last run it passed over).
    let next_cursor = if more || scanned == MAX_SEARCH_SCAN {
        hits.last().map(|(key, _)| *key).or(last_skipped).map(encode_cursor)
    } else {
        None
    };
    if hits.is_empty() {
        return Ok(RunPage { runs: Vec::new(), next_cursor, matches: Vec::new() });
    }
    let ids: Vec<String> = hits.iter().map(|(_, id)| id.clone()).collect();
    let keys: Vec<i64> = hits.iter().map(|(key, _)| *key).collect();
    let (rows, snippets): (Vec<RunRow>, Vec<(i64, String)>) = with_db!(db, |pool, D| {
        let columns = super::columns::qualified_run_columns();
        let select = sql!(D, format!("SELECT {columns} FROM runs WHERE runs.id {}", D::IN_LIST));
        let runs = sqlx::query_as(select).bind(D::list(&ids)).fetch_all(pool);
        let mut snippets = D::snippets(query, &keys);
        let snippets = snippets.build_query_as().fetch_all(pool);
        futures::try_join!(runs, snippets)?
    });
    let mut runs: HashMap<String, Run> = rows.into_iter().map(|row| (row.id.clone(), Run::from(row))).collect();
    let snippets: HashMap<i64, String> = snippets.into_iter().collect();
    let mut page =
        RunPage { runs: Vec::with_capacity(hits.len()), next_cursor, matches: Vec::with_capacity(hits.len()) };
    for (key, run_id) in hits {
        // A run deleted since the pieces were read is left out.
        let Some(run) = runs.remove(&run_id) else { continue };
        let (matched_in, step_index) = place(key);
        let snippet = snippets.get(&key).map(|s| SnippetPart::parse(s)).unwrap_or_default();
        page.matches.push(SearchMatch { run_id: run.id.clone(), matched_in, step_index, snippet });
        page.runs.push(run);
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_place() {
        let run = 7i64 << PIECE_BITS;
        assert_eq!(place(run), (MatchedIn::Run, None));
        assert_eq!(place(run | 1 << 26 | 12), (MatchedIn::Answer, Some(12)));
        assert_eq!(place(run | 2 << 26 | 12 << 8 | 3), (MatchedIn::ToolCall, Some(12)));
        assert_eq!(place(run | 3 << 26 | 4), (MatchedIn::Message, None));
        assert_eq!(decode_cursor(&encode_cursor(run | 5)).unwrap(), run);
        for bad in ["", "t", "tx", "t-1", "1700000000000_run", "t99999999999999999999"] {
            assert!(decode_cursor(bad).is_err(), "{bad}");
        }
    }
}
