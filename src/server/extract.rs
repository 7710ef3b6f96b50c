//! Typed request extractors whose rejections are the app's [`AppError`]s.
//!
//! - [`AppJson<T>`]: a JSON body. Malformed JSON, a wrong type or an unknown
//!   field is a 400 with serde's own explanation (`invalid request body:
//!   unknown field `colour`, expected one of …`); a body that is not
//!   `application/json` is a 415 and one over the size limit a 413, like the
//!   router's guards say (see `super::guard`). `Option<AppJson<T>>` takes an
//!   empty body (or only white space, or `null`) as `None`: the optional
//!   bodies of approve and reject.
//! - [`AppQuery<T>`]: a query string into a struct. A value that does not
//!   fit is a 400 naming the parameter (`limit must be a number from 1 to
//!   200, not `0``), and so is an unknown parameter (`unknown query
//!   parameter `tenant_id`, expected one of …`: every query struct is
//!   `deny_unknown_fields`). The API reads an empty value (`?limit=`, what an
//!   untouched form field sends) as an absent one: query structs mark their
//!   fields with [`optional`], and numbers with bounds are [`Bounded`].

use std::fmt::Display;
use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::StatusCode;
use runlens_engine::openapi::raw;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::json;
use utoipa::openapi::{RefOr, Schema};
use utoipa::PartialSchema;

use super::error::AppError;
use super::MAX_BODY_BYTES;

/// A JSON request body of type `T` (see the module docs).
#[derive(Debug)]
pub struct AppJson<T>(pub T);

impl<S, T> FromRequest<S> for AppJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, AppError> {
        let body = json_body(req, state).await?;
        parse(&body).map(AppJson)
    }
}

impl<S, T> OptionalFromRequest<S> for AppJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, AppError> {
        let body = json_body(req, state).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        parse::<Option<T>>(&body).map(|v| v.map(AppJson))
    }
}

/// The body's bytes, when it is JSON (or empty) and within the limit.
async fn json_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, AppError> {
    let content_type = req.headers().get(CONTENT_TYPE).map(|v| v.to_str().unwrap_or("\u{fffd}").trim().to_owned());
    let body = Bytes::from_request(req, state).await.map_err(|e| match e.status() {
        StatusCode::PAYLOAD_TOO_LARGE => {
            AppError::PayloadTooLarge(format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes"))
        }
        _ => AppError::BadRequest(format!("the request body could not be read: {}", e.body_text())),
    })?;
    match content_type.as_deref().filter(|t| !t.is_empty()) {
        Some(t) if super::guard::is_json(t) => Ok(body),
        None if body.is_empty() => Ok(body),
        declared => Err(AppError::UnsupportedMediaType(super::guard::unsupported_message(declared))),
    }
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, AppError> {
    serde_json::from_slice(body).map_err(|e| AppError::BadRequest(format!("invalid request body: {e}")))
}

/// The query string as a `T` (see the module docs).
#[derive(Debug)]
pub struct AppQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for AppQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, AppError> {
        query(parts.uri.query().unwrap_or_default()).map(AppQuery)
    }
}

/// Reads a query string into `T`; an error names the parameter.
pub fn query<T: DeserializeOwned>(text: &str) -> Result<T, AppError> {
    let pairs = serde_urlencoded::Deserializer::new(form_urlencoded::parse(text.as_bytes()));
    serde_path_to_error::deserialize(pairs).map_err(|e| {
        let field = e.path().to_string();
        let why = e.into_inner().to_string();
        // A query struct with `deny_unknown_fields`: say "parameter", not "field".
        if let Some(rest) = why.strip_prefix("unknown field ") {
            return AppError::BadRequest(format!("unknown query parameter {rest}"));
        }
        AppError::BadRequest(if field == "." { why } else { format!("{field} {why}") })
    })
}

/// For `#[serde(default, deserialize_with = "optional")]` query fields: an
/// empty value is no value; any other is parsed with `T::from_str`, whose
/// error message follows the parameter's name.
pub fn optional<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: Display,
{
    let text = String::deserialize(deserializer)?;
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(D::Error::custom)
}

/// A whole number from `MIN` to `MAX` in a query string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounded<const MIN: u64, const MAX: u64>(pub u64);

impl<const MIN: u64, const MAX: u64> FromStr for Bounded<MIN, MAX> {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.parse() {
            Ok(n) if (MIN..=MAX).contains(&n) => Ok(Bounded(n)),
            _ => Err(format!("must be a number from {MIN} to {MAX}, not `{text}`")),
        }
    }
}

impl<const MIN: u64, const MAX: u64> Bounded<MIN, MAX> {
    /// The number as a `u32` (for bounds within `u32`).
    pub fn as_u32(self) -> u32 {
        u32::try_from(self.0).unwrap_or(u32::MAX)
    }
}

/// `true`/`1` or `false`/`0` in a query string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flag(pub bool);

impl FromStr for Flag {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "true" | "1" => Ok(Flag(true)),
            "false" | "0" => Ok(Flag(false)),
            other => Err(format!("must be true or false, not `{other}`")),
        }
    }
}

/// The schema of a [`Bounded`] query value: an integer from `min` to `max`,
/// or empty (absent).
pub fn bounded_schema(min: u64, max: u64) -> RefOr<Schema> {
    RefOr::T(raw(json!({
        "type": ["integer", "string"],
        "minimum": min,
        "maximum": max,
        "maxLength": 0,
        "description": format!("an integer from {min} to {max}; empty means absent"),
    })))
}

/// Names the schema of a [`Bounded`] query value, for `#[param(value_type =
/// Option<Name>, inline)]` (the document needs a type without generics).
#[macro_export]
macro_rules! bounded_param {
    ($(#[$doc:meta])* $name:ident = $min:expr, $max:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                $crate::server::extract::bounded_schema($min, $max)
            }
        }
    };
}

/// A [`Flag`]'s schema in the API document: it accepts an empty value, which
/// means absent.
impl PartialSchema for Flag {
    fn schema() -> RefOr<Schema> {
        RefOr::T(raw(json!({ "type": "string", "enum": ["true", "false", "1", "0", ""] })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Q {
        #[serde(default, deserialize_with = "optional")]
        limit: Option<Bounded<1, 200>>,
        #[serde(default, deserialize_with = "optional")]
        payloads: Option<Flag>,
        #[serde(default, deserialize_with = "optional")]
        q: Option<String>,
    }

    fn message(result: Result<Q, AppError>) -> String {
        match result {
            Err(AppError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        }
    }

    #[test]
    fn empty_values_are_absent_and_others_parse() {
        let q: Q = query("limit=&payloads=&q=").unwrap();
        assert_eq!(q, Q { limit: None, payloads: None, q: None });
        let q: Q = query("limit=200&payloads=0&q=a%20b&other=ignored").unwrap();
        assert_eq!(q, Q { limit: Some(Bounded(200)), payloads: Some(Flag(false)), q: Some("a b".into()) });
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Body {
        n: u32,
    }

    async fn body(content_type: Option<&str>, body: &str) -> Result<Option<Body>, AppError> {
        let mut req = Request::builder().method("POST");
        if let Some(t) = content_type {
            req = req.header(CONTENT_TYPE, t);
        }
        let req = req.body(axum::body::Body::from(body.to_owned())).unwrap();
        <AppJson<Body> as OptionalFromRequest<()>>::from_request(req, &()).await.map(|b| b.map(|AppJson(b)| b))
    }

    fn refusal(result: Result<Option<Body>, AppError>) -> (StatusCode, String) {
        use axum::response::IntoResponse;
        match result {
            Err(e) => {
                let message = match &e {
                    AppError::BadRequest(m) | AppError::PayloadTooLarge(m) | AppError::UnsupportedMediaType(m) => {
                        m.clone()
                    }
                    other => panic!("unexpected {other:?}"),
                };
                (e.into_response().status(), message)
            }
            Ok(b) => panic!("accepted {b:?}"),
        }
    }

    #[tokio::test]
    async fn json_bodies_parse_or_are_refused_with_serdes_explanation() {
        assert_eq!(body(Some("application/json; charset=utf-8"), r#"{"n": 3}"#).await.unwrap(), Some(Body { n: 3 }));
        assert_eq!(body(Some("application/json"), " \n").await.unwrap(), None, "an empty optional body");
        assert_eq!(body(None, "").await.unwrap(), None);
        assert_eq!(body(Some("application/json"), "null").await.unwrap(), None);
        let (status, message) = refusal(body(Some("application/json"), "{oops").await);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(message.starts_with("invalid request body: key must be a string"), "{message}");
        let (status, message) = refusal(body(Some("application/json"), r#"{"n": "x"}"#).await);
        assert_eq!(status, StatusCode::BAD_REQUEST, "a wrong type is a 400, not axum's 422");
        assert!(message.contains("invalid type: string \"x\", expected u32"), "{message}");
        let (status, message) = refusal(body(Some("application/json"), r#"{"n": 1, "m": 2}"#).await);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(message.contains("unknown field `m`"), "{message}");
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_is_a_415_and_one_too_large_a_413() {
        let (status, message) = refusal(body(Some("text/plain"), r#"{"n": 3}"#).await);
        assert_eq!(
            (status, message.as_str()),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "request bodies must be `application/json`, not `text/plain`")
        );
        let (status, message) = refusal(body(None, r#"{"n": 3}"#).await);
        assert_eq!(
            (status, message.as_str()),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "request bodies must be `application/json`, not no Content-Type")
        );
        let huge = format!(r#"{{"n": 1, "pad": "{}"}}"#, "x".repeat(MAX_BODY_BYTES));
        let (status, message) = refusal(body(Some("application/json"), &huge).await);
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(message, format!("the request body is larger than the limit of {MAX_BODY_BYTES} bytes"));
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Strict {
        #[serde(default, deserialize_with = "optional")]
        limit: Option<Bounded<1, 200>>,
        #[serde(default, deserialize_with = "optional")]
        offset: Option<Bounded<0, 100>>,
    }

    #[test]
    fn an_unknown_parameter_is_a_400_naming_it() {
        let message = match query::<Strict>("limit=2&tenant_id=x") {
            Err(AppError::BadRequest(m)) => m,
            other => panic!("expected a 400, got {other:?}"),
        };
        assert_eq!(message, "unknown query parameter `tenant_id`, expected `limit` or `offset`");
        assert!(query::<Strict>("limit=2&offset=").is_ok());
    }

    #[test]
    fn a_bad_value_is_a_400_naming_the_parameter() {
        assert_eq!(message(query::<Q>("limit=0")), "limit must be a number from 1 to 200, not `0`");
        assert_eq!(message(query::<Q>("limit=%FF")), "limit must be a number from 1 to 200, not `\u{fffd}`");
        assert_eq!(message(query::<Q>("payloads=maybe")), "payloads must be true or false, not `maybe`");
    }
}
