//! Where a sign-in (or a theme switch) returns to: a `next=` target that
//! can only lead to a path of this site, whatever decodes it.

/// Percent-encodes a path and query for a `next=` parameter.
pub fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A `next=` target that stays on this site: a path of this origin, else
/// `/`. See [`is_local_path`].
pub fn local_target(next: Option<&str>) -> String {
    match next {
        Some(n) if is_local_path(n) => n.to_owned(),
        _ => "/".to_owned(),
    }
}

/// Whether `path` can only lead to a path of this origin, however a browser
/// (or a page that decodes it again) reads it: printable ASCII (at most
/// 2,000 characters) starting with one `/`; neither it nor any decoding of
/// its percent-escapes starts with `//` or `/\` or holds a backslash, a
/// control character (browsers drop tab and newline from URLs, so
/// `/<TAB>/evil.example` is `//evil.example`) or bytes that are not UTF-8.
/// Everything else (a scheme, `//host`, `%2f%2fhost`) is refused.
fn is_local_path(path: &str) -> bool {
    if path.len() > 2000 || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return false;
    }
    let mut text = std::borrow::Cow::Borrowed(path);
    // Each layer of escapes a later reader might undo (a bound: four).
    for _ in 0..4 {
        let safe = text.starts_with('/')
            && !text[1..].starts_with(['/', '\\'])
            && !text.chars().any(|c| c == '\\' || c.is_control() || c == '\u{fffd}');
        if !safe {
            return false;
        }
        match percent_decoded(&text) {
            Some(decoded) => text = std::borrow::Cow::Owned(decoded),
            None => return true,
        }
    }
    false
}

/// `text` with its `%XX` escapes decoded (invalid UTF-8 as U+FFFD); `None`
/// when it has none.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let (mut i, mut any) = (0, false);
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%').then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?))).flatten();
        match escaped {
            Some((hi, lo)) => {
                out.push((hi * 16 + lo) as u8);
                (i, any) = (i + 3, true);
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    any.then(|| String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_targets_stay_on_this_site() {
        assert_eq!(local_target(Some("/runs/1?x=2")), "/runs/1?x=2");
        assert_eq!(local_target(Some("/runs?q=a%20b&x=%41")), "/runs?q=a%20b&x=%41");
        assert_eq!(local_target(Some("/agents/caf%C3%A9")), "/agents/caf%C3%A9");
        let bad = [
            "//evil.example/",
            "https://evil.example/",
            "javascript:alert(1)",
            "/\\evil.example",
            "/\\/evil.example",
            "runs",
            "",
            // Browsers drop tab, CR and LF from URLs: `/\t/evil.example` is `//evil.example`.
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "/ /evil.example",
            "/%09/evil.example",
            "/%0a/evil.example",
            "/%0D%0A/evil.example",
            "/%2f%2fevil.example",
            "/%2F/evil.example",
            "/%5cevil.example",
            "/%5C%5Cevil.example",
            "/runs\\..\\..\\evil",
            "/%252f/evil.example",
            "/%25252f/evil.example",
            "/%2525252f/evil.example",
            "/%ff/evil.example",
            "/\u{7f}/evil.example",
            "/caf\u{e9}",
        ];
        for bad in bad {
            assert_eq!(local_target(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local_target(Some(&format!("/{}", "a".repeat(2000)))), "/");
        assert_eq!(local_target(None), "/");
    }
}
