//! Plain formatting helpers shared by pages and the form handler.
//!
//! Pure functions, no clock: callers pass "now" explicitly (the server ships it
//! with the data) so the server render and the hydrated render agree.

use chrono::{DateTime, Utc};
use serde_json::Value;

/// Placeholder for a value that does not exist (yet).
pub const NONE: &str = "—";

/// Human duration: `850 ms`, `4.2 s`, `3m 07s`, `2h 05m`.
pub fn duration_ms(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1_000.0)
    } else if ms < 3_600_000 {
        let s = ms / 1_000;
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        let m = ms / 60_000;
        format!("{}h {:02}m", m / 60, m % 60)
    }
}

/// Milliseconds between two instants, when both are known.
pub fn span_ms(start: Option<DateTime<Utc>>, end: Option<DateTime<Utc>>) -> Option<i64> {
    Some((end? - start?).num_milliseconds().max(0))
}

/// [`duration_ms`] of an optional duration, or a dash.
pub fn opt_duration(ms: Option<i64>) -> String {
    ms.map(duration_ms).unwrap_or_else(|| NONE.to_string())
}

/// Timestamp as shown in tables: `2025-01-31 14:05:09` (UTC).
pub fn time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Time of day with milliseconds, for events within one run.
pub fn clock(t: &DateTime<Utc>) -> String {
    t.format("%H:%M:%S%.3f").to_string()
}

/// [`time`] of an optional timestamp, or a dash.
pub fn opt_time(t: Option<&DateTime<Utc>>) -> String {
    t.map(time).unwrap_or_else(|| NONE.to_string())
}

/// Indented JSON for `<pre>` blocks. `null` stays `null`.
pub fn pretty_json(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

/// Text for the content of a `<textarea>` or the page `<title>`.
///
/// Leptos writes both into the server HTML *without* escaping (textarea
/// children, and leptos_meta's `<Title>`), so a payload containing
/// `</textarea>` or `</title>` could break out of the element. On the server
/// this escapes `&`, `<` and `>` (the browser decodes the entities back into
/// the same text); in the browser, where the text becomes a DOM text node or
/// `document.title`, it is returned unchanged.
pub fn rcdata_text(text: &str) -> String {
    if cfg!(feature = "ssr") {
        text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    } else {
        text.to_string()
    }
}

/// `1 item`, `2 items`: a count with its noun.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Shortens long ids for tables while keeping them recognisable.
pub fn short_id(id: &str) -> String {
    let chars: Vec<char> = id.chars().collect();
    if chars.len() <= 14 {
        id.to_string()
    } else {
        let tail: String = chars[chars.len() - 8..].iter().collect();
        format!("…{tail}")
    }
}

/// Percent-encodes one query-string component (RFC 3986 unreserved characters
/// pass through; everything else, including spaces, becomes `%XX`).
pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `a=1&b=x%20y` from pairs, skipping empty values so URLs stay short.
pub fn query_string<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    pairs
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", url_encode(k), url_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A `key:value` filter as the API takes it: `key=value` too (the
/// playground writes tags with `=`), trimmed.
pub fn key_value(text: &str) -> String {
    let text = text.trim();
    if text.contains(':') {
        text.to_string()
    } else {
        text.replacen('=', ":", 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_readable_unit() {
        assert_eq!(duration_ms(850), "850 ms");
        assert_eq!(duration_ms(4_250), "4.2 s");
        assert_eq!(duration_ms(187_000), "3m 07s");
        assert_eq!(duration_ms(7_500_000), "2h 05m");
        assert_eq!(duration_ms(-5), "0 ms");
    }

    #[test]
    fn url_encoding_escapes_reserved_and_unicode() {
        assert_eq!(url_encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(query_string([("q", "x y"), ("tag", ""), ("cursor", "c1")]), "q=x%20y&cursor=c1");
    }

    #[cfg(feature = "ssr")]
    #[test]
    fn rcdata_text_cannot_close_its_element_on_the_server() {
        assert_eq!(rcdata_text("a</textarea><b>&amp;"), "a&lt;/textarea&gt;&lt;b&gt;&amp;amp;");
    }

    #[test]
    fn short_ids_keep_the_tail() {
        assert_eq!(short_id("run_1"), "run_1");
        assert_eq!(short_id("0198a7c2-aaaa-bbbb-cccc-1234567890ab"), "…567890ab");
    }
}
