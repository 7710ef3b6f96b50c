//! A small CSV reader (RFC 4180): comma-separated fields, a field in double
//! quotes may hold commas, line breaks and doubled quotes (`""` is one `"`),
//! records end with LF or CRLF. A quote inside an unquoted field is kept as
//! text; a quoted field that is never closed, or text after its closing
//! quote, is an error naming the line.

/// One record: its fields, and the line it starts on (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

/// The records of `text` (a byte-order mark first is skipped); an error is
/// `(line, why)`.
pub(super) fn records(text: &str) -> Result<Vec<Record>, (usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let (mut line, mut start) = (1, 1);
    // Whether the next character starts a field, and whether the record has begun.
    let (mut field_start, mut in_record) = (true, false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if field_start => {
                let opened = line;
                loop {
                    match chars.next() {
                        None => return Err((opened, "a quoted field is not closed".into())),
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some('\n') => {
                            line += 1;
                            field.push('\n');
                        }
                        Some(c) => field.push(c),
                    }
                }
                let after: Vec<char> = chars.clone().take(2).collect();
                match after.as_slice() {
                    [] | [',' | '\n', ..] | ['\r', '\n'] => {}
                    _ => {
                        return Err((line, "text after a closing quote (a quote in a field is written `\"\"`)".into()))
                    }
                }
                field_start = false;
                in_record = true;
            }
            ',' => {
                fields.push(std::mem::take(&mut field));
                field_start = true;
                in_record = true;
            }
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                if in_record || !field.is_empty() {
                    fields.push(std::mem::take(&mut field));
                    records.push(Record { line: start, fields: std::mem::take(&mut fields) });
                } else {
                    // An empty line: a record of one empty field.
                    records.push(Record { line: start, fields: vec![String::new()] });
                }
                line += 1;
                start = line;
                field_start = true;
                in_record = false;
            }
            c => {
                field.push(c);
                field_start = false;
                in_record = true;
            }
        }
    }
    if in_record {
        fields.push(field);
        records.push(Record { line: start, fields });
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Vec<(usize, Vec<&'static str>)> {
        records(text)
            .unwrap()
            .into_iter()
            .map(|r| (r.line, r.fields.into_iter().map(|f| &*Box::leak(f.into_boxed_str())).collect()))
            .collect()
    }

    #[test]
    fn plain_and_quoted_fields_with_lf_or_crlf() {
        assert_eq!(fields("a,b\n1,2\n"), [(1, vec!["a", "b"]), (2, vec!["1", "2"])]);
        assert_eq!(fields("a,b\r\n1,2\r\n"), [(1, vec!["a", "b"]), (2, vec!["1", "2"])]);
        assert_eq!(fields("a,b\n1,2"), [(1, vec!["a", "b"]), (2, vec!["1", "2"])], "no final line break");
        assert_eq!(fields("\"x, y\",\"say \"\"hi\"\"\"\n"), [(1, vec!["x, y", "say \"hi\""])]);
        assert_eq!(fields("a,,\n"), [(1, vec!["a", "", ""])]);
        assert_eq!(fields("\"\"\n"), [(1, vec![""])]);
        assert_eq!(fields("\u{feff}p\nq\n"), [(1, vec!["p"]), (2, vec!["q"])]);
        assert_eq!(fields("it's 5\" tall\n"), [(1, vec!["it's 5\" tall"])], "a quote inside an unquoted field");
    }

    #[test]
    fn a_quoted_field_may_span_lines_and_records_keep_their_first_line() {
        let got = fields("h\r\n\"one\r\ntwo\"\r\nthree\r\n");
        assert_eq!(got, [(1, vec!["h"]), (2, vec!["one\r\ntwo"]), (4, vec!["three"])]);
        assert_eq!(fields("h\n\nx\n"), [(1, vec!["h"]), (2, vec![""]), (3, vec!["x"])], "an empty line");
    }

    #[test]
    fn unclosed_quotes_and_text_after_a_quote_name_their_line() {
        assert_eq!(records("h\n\"open\nmore\n").unwrap_err().0, 2);
        let (line, why) = records("h\nok\n\"a\"b,c\n").unwrap_err();
        assert_eq!(line, 3);
        assert!(why.starts_with("text after a closing quote"), "{why}");
    }
}
