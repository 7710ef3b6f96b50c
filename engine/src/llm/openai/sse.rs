//! A server-sent events parser, just as much as Chat Completions streams need.
//!
//! The HTTP body arrives in arbitrary pieces: a line, an event or even a
//! multi-byte UTF-8 character can be split between two of them. [`SseParser`]
//! buffers bytes (not text, so a split character is never mangled), and hands
//! out the `data` of each complete event. Per the SSE format an event ends at
//! a blank line, its `data:` lines are joined with `\n`, lines starting with
//! `:` are comments (keep-alives) and other fields (`event:`, `id:`,
//! `retry:`) are not needed by Chat Completions and are skipped.

/// Incremental SSE parser: feed it body bytes, get back event payloads.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the line not yet terminated by `\n`.
    line: Vec<u8>,
    /// `data` lines of the event being read.
    data: Vec<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes `bytes`, returning the data of every event they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(pos) = rest.iter().position(|b| *b == b'\n') {
            self.line.extend_from_slice(&rest[..pos]);
            rest = &rest[pos + 1..];
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_done(&line) {
                events.push(event);
            }
        }
        self.line.extend_from_slice(rest);
        events
    }

    /// The body ended: an event not followed by a blank line still counts
    /// (some servers close the connection right after the last `data:` line).
    pub fn finish(&mut self) -> Option<String> {
        let line = std::mem::take(&mut self.line);
        if !line.is_empty() {
            if let Some(event) = self.line_done(&line) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line_done(&mut self, line: &[u8]) -> Option<String> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(b":") {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (text.as_ref(), ""),
        };
        if field == "data" {
            self.data.push(value.to_owned());
        }
        None
    }

    fn dispatch(&mut self) -> Option<String> {
        if self.data.is_empty() {
            return None;
        }
        Some(std::mem::take(&mut self.data).join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(body: &[u8], piece: usize) -> Vec<String> {
        let mut p = SseParser::new();
        let mut out: Vec<String> = body.chunks(piece).flat_map(|c| p.push(c)).collect();
        out.extend(p.finish());
        out
    }

    #[test]
    fn events_end_at_blank_lines() {
        let body = b"data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n";
        assert_eq!(parse_in_pieces(body, 1000), ["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
    }

    #[test]
    fn any_split_of_the_body_gives_the_same_events() {
        let body = "data: {\"text\":\"héllo → wörld\"}\r\n\r\n: keep-alive\n\nevent: message\ndata: x\n\n";
        for piece in 1..body.len() {
            assert_eq!(parse_in_pieces(body.as_bytes(), piece), ["{\"text\":\"héllo → wörld\"}", "x"], "piece {piece}");
        }
    }

    #[test]
    fn multi_line_data_is_joined_and_other_fields_are_skipped() {
        let body = b"id: 7\nretry: 100\ndata: line one\ndata:line two\n\n";
        assert_eq!(parse_in_pieces(body, 3), ["line one\nline two"]);
    }

    #[test]
    fn comments_alone_make_no_event() {
        assert!(parse_in_pieces(b": ping\n\n: ping\n\n", 4).is_empty());
    }

    #[test]
    fn an_unterminated_last_event_is_flushed_at_the_end() {
        assert_eq!(parse_in_pieces(b"data: {\"a\":1}\n\ndata: [DONE]", 5), ["{\"a\":1}", "[DONE]"]);
        assert_eq!(parse_in_pieces(b"data: last\n", 5), ["last"]);
    }
}
