//! The router's outer guards: unsafe requests from another origin are
//! refused (403), the REST API takes only JSON bodies (415) and only the
//! query parameters its document names (400), every error of
//! the API is `{"error": "…"}` JSON, and a panic while serving one request
//! answers that request with a 500.
//!
//! Why: a web page the operator visits can send a "simple" cross-origin
//! request (a form post, or `fetch` with a `text/plain` body) without the
//! browser asking the server first. Taking only `application/json` on the
//! REST API forces a preflight, which no CORS header here ever grants; the
//! origin check also covers the page form posts and the Leptos server
//! functions, which must take form-encoded bodies from the app's own pages.
//! A request that names no origin at all (curl, scripts) is not a browser's
//! cross-site request and is let through.

use std::any::Any;
use std::collections::HashSet;
use std::sync::{Arc, LazyLock};

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ErrorBody;

/// Origins allowed besides the request's own `Host`: the operator's public
/// origin (`--public-origin`) when a reverse proxy serves the app under
/// another name.
#[derive(Clone, Debug, Default)]
pub struct Origins {
    public: Option<String>,
}

impl Origins {
    pub fn new(public: Option<&str>) -> Self {
        Origins { public: public.and_then(normalize_origin) }
    }

    /// Whether `origin` (normalized) is the configured public origin.
    pub fn is_public(&self, origin: &str) -> bool {
        self.public.as_deref() == Some(origin)
    }
}

/// `scheme://host[:port]` in lower case without a default port, from an
/// origin or any absolute URL (a `Referer`); `None` when it is not one.
pub fn normalize_origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?.to_ascii_lowercase();
    if authority.is_empty() {
        return None;
    }
    Some(with_scheme(&scheme, &authority))
}

fn with_scheme(scheme: &str, authority: &str) -> String {
    let default_port = if scheme == "https" { ":443" } else { ":80" };
    let host = authority.strip_suffix(default_port).unwrap_or(authority);
    format!("{scheme}://{host}")
}

/// The origin this request was sent to: its `Host` (or the URI's authority),
/// over https when a proxy says so in `X-Forwarded-Proto`.
pub fn own_origin(req: &Request) -> Option<String> {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))?;
    let forwarded_https = headers
        .get("x-forwarded-proto")
        .and_then(|h| h.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    let scheme = if forwarded_https || req.uri().scheme_str() == Some("https") { "https" } else { "http" };
    Some(with_scheme(scheme, &host.to_ascii_lowercase()))
}

fn is_unsafe(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE)
}

fn header_text(headers: &HeaderMap, name: impl header::AsHeaderName) -> Option<&str> {
    headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}")).map(str::trim).filter(|v| !v.is_empty())
}

/// Why an unsafe request must be refused, or `None` when it may go on.
fn cross_origin_refusal(req: &Request, origins: &Origins) -> Option<String> {
    let headers = req.headers();
    if header_text(headers, "sec-fetch-site").is_some_and(|s| s.eq_ignore_ascii_case("cross-site")) {
        return Some("cross-site request refused (Sec-Fetch-Site: cross-site)".into());
    }
    let (claimed, which) = match header_text(headers, header::ORIGIN) {
        Some(origin) => (origin, "Origin"),
        None => match header_text(headers, header::REFERER) {
            Some(referer) => (referer, "Referer"),
            None => return None,
        },
    };
    let claimed_origin = normalize_origin(claimed);
    let own = own_origin(req);
    let allowed =
        claimed_origin.as_deref().is_some_and(|c| own.as_deref() == Some(c) || origins.public.as_deref() == Some(c));
    if allowed {
        return None;
    }
    let own = origins.public.clone().or(own).unwrap_or_else(|| "unknown".into());
    Some(format!(
        "cross-origin request refused: {which} `{}` is not this server's origin ({own}); \
         behind a reverse proxy, set --public-origin (RUNLENS_PUBLIC_ORIGIN)",
        claimed_origin.as_deref().unwrap_or(claimed)
    ))
}

/// Refuses unsafe requests (POST, PUT, PATCH, DELETE) whose `Origin` — or,
/// without one, `Referer` — names another origin, and any that a browser
/// marks `Sec-Fetch-Site: cross-site`, with 403 `{"error"}`.
pub async fn same_origin(State(origins): State<Arc<Origins>>, req: Request, next: Next) -> Response {
    if is_unsafe(req.method()) {
        if let Some(reason) = cross_origin_refusal(&req, &origins) {
            tracing::warn!(method = %req.method(), path = %req.uri().path(), %reason, "refused a request");
            return error(StatusCode::FORBIDDEN, reason);
        }
    }
    next.run(req).await
}

/// The query parameters of each API operation, as its document names them:
/// by method and the path as routed (`/api/runs/{id}`). Looked up on every
/// API request, without allocating.
#[derive(Debug, Default)]
pub struct KnownQueries(std::collections::HashMap<Method, std::collections::HashMap<String, Vec<String>>>);

impl KnownQueries {
    /// Read from the API's OpenAPI document (as generated: wildcard
    /// segments still spelled `{*name}`, as the router matches them).
    pub fn from_document(doc: &utoipa::openapi::OpenApi) -> Self {
        let doc = serde_json::to_value(doc).unwrap_or_default();
        let mut known: std::collections::HashMap<Method, std::collections::HashMap<String, Vec<String>>> =
            std::collections::HashMap::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            // The public documents and the health check take what probes and
            // caches add (`?v=2`); they read no query.
            if super::openapi::PUBLIC_PATHS.contains(&path.as_str()) {
                continue;
            }
            for (method, op) in item.as_object().into_iter().flatten() {
                let Ok(method) = Method::from_bytes(method.to_ascii_uppercase().as_bytes()) else { continue };
                let names = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "query")
                    .filter_map(|p| p["name"].as_str().map(str::to_owned))
                    .collect();
                known.entry(method).or_default().insert(path.clone(), names);
            }
        }
        KnownQueries(known)
    }

    /// The parameters `method` on the routed `path` takes; `None` for an
    /// operation the document does not have or a public one (not checked).
    fn of(&self, method: &Method, path: &str) -> Option<&[String]> {
        let method = if method == Method::HEAD { &Method::GET } else { method };
        self.0.get(method)?.get(path).map(Vec::as_slice)
    }
}

/// On the REST API: a query parameter the operation does not document is a
/// 400 naming it (a client paging with a parameter the API does not have,
/// like `offset` once was, would otherwise loop on the first page). The
/// handlers' query structs refuse unknown fields as well; this also covers
/// the operations that take no query at all.
pub async fn known_query(State(known): State<Arc<KnownQueries>>, req: Request, next: Next) -> Response {
    let unknown = match (req.uri().query(), req.extensions().get::<axum::extract::MatchedPath>()) {
        (Some(query), Some(path)) => known.of(req.method(), path.as_str()).and_then(|names| {
            let mut pairs = form_urlencoded::parse(query.as_bytes());
            pairs.find(|(name, _)| !names.iter().any(|n| n == name)).map(|(name, _)| (name.into_owned(), names))
        }),
        _ => None,
    };
    match unknown {
        None => next.run(req).await,
        Some((name, [])) => {
            error(StatusCode::BAD_REQUEST, format!("unknown query parameter `{name}`: this operation takes none"))
        }
        Some((name, names)) => {
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            let expected = match names.as_slice() {
                [one] => one.clone(),
                [first @ .., last] => format!("one of {}, {last}", first.join(", ")),
                [] => String::new(),
            };
            error(StatusCode::BAD_REQUEST, format!("unknown query parameter `{name}`, expected {expected}"))
        }
    }
}

/// Whether a `Content-Type` is JSON (`application/json`, any parameters).
pub(super) fn is_json(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// On the REST API: an unsafe request with a body must send it as
/// `application/json` (415 otherwise). Bodiless requests (cancel, approve
/// without a comment, delete) need no content type.
pub async fn json_bodies(req: Request, next: Next) -> Response {
    // OTLP/HTTP takes protobuf too, and checks its own content types.
    if !is_unsafe(req.method()) || req.uri().path() == super::routes::otlp::PATH {
        return next.run(req).await;
    }
    let content_type = header_text(req.headers(), header::CONTENT_TYPE).map(str::to_owned);
    if content_type.as_deref().is_some_and(is_json) {
        return next.run(req).await;
    }
    let declared_length =
        header_text(req.headers(), header::CONTENT_LENGTH).map(|n| n.parse::<u64>().unwrap_or(u64::MAX));
    match declared_length {
        Some(0) => next.run(req).await,
        Some(_) => unsupported(content_type.as_deref()),
        None if req.body().size_hint().exact() == Some(0) => next.run(req).await,
        None => {
            // A body of unknown length (chunked): it may still be empty.
            let (parts, body) = req.into_parts();
            match axum::body::to_bytes(body, 0).await {
                Ok(bytes) if bytes.is_empty() => next.run(Request::from_parts(parts, Body::empty())).await,
                _ => unsupported(content_type.as_deref()),
            }
        }
    }
}

fn unsupported(content_type: Option<&str>) -> Response {
    error(StatusCode::UNSUPPORTED_MEDIA_TYPE, unsupported_message(content_type))
}

/// The 415 message for a body sent as `content_type`.
pub(super) fn unsupported_message(content_type: Option<&str>) -> String {
    let got = content_type.map_or_else(|| "no Content-Type".to_owned(), |t| format!("`{t}`"));
    format!("request bodies must be `application/json`, not {got}")
}

/// The server functions' paths: their errors keep the encoding the pages'
/// client code reads.
static SERVER_FN_PATHS: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| leptos::server_fn::axum::server_fn_paths().map(|(path, _)| path).collect());

fn is_api(path: &str) -> bool {
    ((path == "/api" || path.starts_with("/api/")) && !SERVER_FN_PATHS.contains(path))
        || path == super::routes::otlp::PATH
}

/// Error bodies read to carry their text over into `{"error"}`.
const MAX_ERROR_TEXT: usize = 4096;

/// Makes every error answer under `/api` (but the server functions') the
/// JSON `{"error": "…"}`: axum's own rejections (bad path or query, a body
/// over the limit, a method the route has not) are plain text or empty.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if !is_api(&path) {
        return next.run(req).await;
    }
    let method = req.method().clone();
    let response = next.run(req).await;
    let status = response.status();
    let is_json_already = header_text(response.headers(), header::CONTENT_TYPE).is_some_and(is_json);
    if !(status.is_client_error() || status.is_server_error()) || is_json_already {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, MAX_ERROR_TEXT).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
        Err(_) => String::new(),
    };
    let plain = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|t| t.to_str().ok())
        .is_some_and(|t| t.starts_with("text/plain"));
    let message = match status {
        StatusCode::NOT_FOUND => format!("no API endpoint `{path}`"),
        StatusCode::METHOD_NOT_ALLOWED => {
            let allowed = parts.headers.get(header::ALLOW).and_then(|a| a.to_str().ok()).unwrap_or("");
            format!("method {method} is not allowed on `{path}`; allowed: {allowed}")
        }
        StatusCode::PAYLOAD_TOO_LARGE => {
            let limit = if path == "/api/runs/import" {
                super::routes::conversation::MAX_IMPORT_BYTES
            } else {
                super::MAX_BODY_BYTES
            };
            format!("the request body is larger than the limit of {limit} bytes")
        }
        _ if plain && !text.is_empty() => text,
        _ => status.canonical_reason().unwrap_or("error").to_owned(),
    };
    let mut response = error(status, message);
    if let Some(allow) = parts.headers.get(header::ALLOW) {
        response.headers_mut().insert(header::ALLOW, allow.clone());
    }
    response
}

/// `GET /api/…` that names no endpoint: a JSON 404 (not the app's HTML page).
pub async fn api_not_found(req: Request) -> Response {
    error(StatusCode::NOT_FOUND, format!("no API endpoint `{}`", req.uri().path()))
}

/// The answer to a request whose handler panicked: a 500 (made JSON under
/// `/api` by [`json_errors`]); the panic's message goes to the log.
pub fn panic_response(err: Box<dyn Any + Send + 'static>) -> Response {
    tracing::error!(panic = %panic_message(err.as_ref()), "a request handler panicked");
    panic_answer()
}

/// A panic's message, when it has one.
pub fn panic_message(err: &(dyn Any + Send)) -> &str {
    err.downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| err.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}

/// The 500 answered for a panic.
pub fn panic_answer() -> Response {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        "internal error; see the server log",
    )
        .into_response()
}

fn error(status: StatusCode, message: String) -> Response {
    ErrorBody::new(message).answer(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_normalized() {
        assert_eq!(normalize_origin("HTTP://Example.COM:80/x?y").as_deref(), Some("http://example.com"));
        assert_eq!(normalize_origin("https://a.b:443").as_deref(), Some("https://a.b"));
        assert_eq!(normalize_origin("https://a.b:8443/").as_deref(), Some("https://a.b:8443"));
        assert_eq!(normalize_origin("null"), None);
        assert_eq!(normalize_origin("file:///etc/passwd"), None);
        assert_eq!(normalize_origin("http://"), None);
    }

    #[test]
    fn json_content_types() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/jsonp"));
        assert!(!is_json("multipart/form-data; boundary=x"));
    }
}
