//! Reading an uploaded file into new items, row by row: JSONL (one JSON
//! object per line, each a new item as `POST /api/datasets/{id}/items`
//! takes it) or CSV (a header row naming the columns: `prompt`, required;
//! `expected`, JSON when it parses, else text; `tags`, `;`-separated; any
//! other column a metadata key). Each row is read on its own, so a refusal
//! can name every bad row by its line.

use serde_json::{Map, Value};

use super::csv;
use crate::model::{DatasetInput, NewDatasetItem, UploadFormat, MAX_LISTED_BAD_ROWS};

/// A row of the file: its line (1-based), and the item it makes or why it makes none.
pub(super) type Row = (usize, Result<NewDatasetItem, String>);

/// What a file of `format` is made of, for a message about an empty one.
pub(super) fn shape(format: UploadFormat) -> &'static str {
    match format {
        UploadFormat::Jsonl => "a JSONL file has one JSON object per line, each an item",
        UploadFormat::Csv => "a CSV file has a header row naming the columns, then one row per item",
    }
}

/// The rows of `text` (blank lines skipped); an error is about the whole
/// file (a CSV header without `prompt`, a quote never closed).
pub(super) fn rows(format: UploadFormat, text: &str) -> Result<Vec<Row>, String> {
    match format {
        UploadFormat::Jsonl => Ok(jsonl(text)),
        UploadFormat::Csv => csv_rows(text),
    }
}

fn jsonl(text: &str) -> Vec<Row> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    text.split('\n')
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| (i + 1, serde_json::from_str::<NewDatasetItem>(line).map_err(|e| e.to_string())))
        .collect()
}

fn csv_rows(text: &str) -> Result<Vec<Row>, String> {
    let records = csv::records(text).map_err(|(line, why)| format!("line {line}: {why}"))?;
    let mut records = records.into_iter().filter(|r| !(r.fields.len() == 1 && r.fields[0].trim().is_empty()));
    let Some(header) = records.next() else { return Ok(Vec::new()) };
    let columns: Vec<String> = header.fields.iter().map(|c| c.trim().to_owned()).collect();
    for (i, column) in columns.iter().enumerate() {
        if column.is_empty() {
            return Err(format!("line {}: column {} of the header has no name", header.line, i + 1));
        }
        if columns[..i].contains(column) {
            return Err(format!("line {}: the header names the column `{column}` twice", header.line));
        }
    }
    if !columns.iter().any(|c| c == "prompt") {
        return Err(format!(
            "line {}: the header must name a `prompt` column (and may name `expected`, `tags` and metadata columns)",
            header.line
        ));
    }
    Ok(records.map(|r| (r.line, csv_item(&columns, r.fields))).collect())
}

/// The item of one CSV row under `columns`.
fn csv_item(columns: &[String], fields: Vec<String>) -> Result<NewDatasetItem, String> {
    if fields.len() != columns.len() {
        return Err(format!("{} fields, where the header names {} columns", fields.len(), columns.len()));
    }
    let mut item = NewDatasetItem::default();
    let mut metadata = Map::new();
    for (column, cell) in columns.iter().zip(fields) {
        match column.as_str() {
            "prompt" => item.input = DatasetInput::prompt(cell),
            "expected" if cell.trim().is_empty() => {}
            "expected" => item.expected = Some(serde_json::from_str(&cell).unwrap_or(Value::String(cell))),
            "tags" => {
                item.tags = cell.split(';').map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect();
            }
            _ if cell.is_empty() => {}
            other => {
                metadata.insert(other.to_owned(), Value::String(cell));
            }
        }
    }
    item.metadata = (!metadata.is_empty()).then_some(metadata);
    Ok(item)
}

/// The refusal of an upload with the bad rows `bad` (line, why), the first
/// [`MAX_LISTED_BAD_ROWS`] listed.
pub(super) fn refusal(bad: &[(usize, String)]) -> String {
    let listed: Vec<String> =
        bad.iter().take(MAX_LISTED_BAD_ROWS).map(|(line, why)| format!("line {line}: {why}")).collect();
    let more = bad.len().saturating_sub(MAX_LISTED_BAD_ROWS);
    let rows = if bad.len() == 1 { "row" } else { "rows" };
    let mut text = format!("content: {} bad {rows}, nothing kept: {}", bad.len(), listed.join("; "));
    if more > 0 {
        text.push_str(&format!("; and {more} more"));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn jsonl_rows_keep_their_line_numbers_and_skip_blank_lines() {
        let text =
            "{\"input\": {\"prompt\": \"a\"}}\n\n{\"input\": {\"prompt\": \"b\"}, \"expected\": 2}\r\nnot json\n";
        let rows = rows(UploadFormat::Jsonl, text).unwrap();
        let lines: Vec<usize> = rows.iter().map(|r| r.0).collect();
        assert_eq!(lines, [1, 3, 4]);
        assert_eq!(rows[1].1.as_ref().unwrap().expected, Some(json!(2)));
        assert!(rows[2].1.is_err());
    }

    #[test]
    fn csv_columns_make_the_prompt_expected_tags_and_metadata() {
        let text = "prompt,expected,tags,topic\n\"What is 2 + 2?\",4,math; easy ,arith\nSay hi,hello,,\n\
                    Give JSON,\"{\"\"a\"\": 1}\",,\nshort,row\n";
        let rows = rows(UploadFormat::Csv, text).unwrap();
        let first = rows[0].1.as_ref().unwrap();
        assert_eq!(first.input.prompt.as_deref(), Some("What is 2 + 2?"));
        assert_eq!(first.expected, Some(json!(4)));
        assert_eq!(first.tags, ["math", "easy"]);
        assert_eq!(first.metadata.as_ref().unwrap()["topic"], "arith");
        let second = rows[1].1.as_ref().unwrap();
        assert_eq!((second.expected.clone(), second.metadata.clone()), (Some(json!("hello")), None));
        assert_eq!(rows[2].1.as_ref().unwrap().expected, Some(json!({"a": 1})));
        assert_eq!(
            (rows[3].0, rows[3].1.clone().unwrap_err()),
            (5, "2 fields, where the header names 4 columns".into())
        );
    }

    #[test]
    fn a_csv_header_must_name_prompt_once() {
        assert!(rows(UploadFormat::Csv, "question,expected\nx,y\n").unwrap_err().contains("`prompt` column"));
        assert!(rows(UploadFormat::Csv, "prompt,prompt\nx,y\n").unwrap_err().contains("twice"));
        assert!(rows(UploadFormat::Csv, "\n\n").unwrap().is_empty());
    }

    #[test]
    fn a_refusal_lists_twenty_bad_rows_and_counts_the_rest() {
        let bad: Vec<(usize, String)> = (2..30).map(|l| (l, "why".to_owned())).collect();
        let text = refusal(&bad);
        assert!(text.starts_with("content: 28 bad rows, nothing kept: line 2: why; line 3: why"), "{text}");
        assert!(text.contains("line 21: why; and 8 more") && !text.contains("line 22"), "{text}");
        assert_eq!(refusal(&[(4, "x".into())]), "content: 1 bad row, nothing kept: line 4: x");
    }
}
