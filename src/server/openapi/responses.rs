//! The error answers operations share, as OpenAPI response components: each
//! a JSON [`ErrorBody`](super::super::error::ErrorBody) (`{"error": "…"}`).
//! A handler lists the ones it really gives (`(status = 404, response =
//! NotFound)`); those of the guards around every route apply too: 413 and
//! 415 for a body over the limit or not JSON (see `super::super::guard`).
//! 401 ([`Unauthorized`]) and 403 ([`Forbidden`]: a role too low, or a
//! cross-origin request) are added to every operation that needs
//! credentials by `super::secured`.

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::ToResponse;

/// A JSON error answer described by `description`.
fn error(description: &str) -> ResponseBuilder {
    let content = ContentBuilder::new().schema(Some(Ref::from_schema_name("Error"))).build();
    ResponseBuilder::new().description(description).content("application/json", content)
}

macro_rules! error_response {
    ($(#[doc = $doc:literal])* $name:ident, $description:literal) => {
        $(#[doc = $doc])*
        pub struct $name;

        impl<'s> ToResponse<'s> for $name {
            fn response() -> (&'s str, RefOr<Response>) {
                (stringify!($name), RefOr::T(error($description).build()))
            }
        }
    };
}

error_response!(
    /// 400.
    BadRequest,
    "Bad input: the body, a parameter or a bound (the message names the field and its bound)"
);
error_response!(
    /// 403: a role too low, or a request from another origin.
    Forbidden,
    "Refused: the caller's role in the project is too low (the message names the role needed), the action needs \
     an instance admin, or an unsafe request comes from another origin (its Origin, Referer or Sec-Fetch-Site), \
     or, made with the session cookie, shows no sign of coming from this app's own pages"
);
error_response!(
    /// 404.
    NotFound,
    "No such run, call, message, blob, price, project, member, user or key, or one of a project the caller has no \
     role in (also a project named in X-Runlens-Project)"
);
error_response!(
    /// 409.
    Conflict,
    "The run is in the wrong state, or the id exists already; for a decision that lost a race, `decision` holds the winning one"
);
error_response!(
    /// 413.
    TooLarge,
    "The body is over the limit (2 MiB; imports 64 MiB)"
);
error_response!(
    /// 415, from the content-type guard.
    UnsupportedMediaType,
    "The body is not application/json"
);
error_response!(
    /// 413 of `POST /v1/traces`.
    OtlpTooLarge,
    "The body is over 4 MiB as sent or 16 MiB inflated (a gzip body is inflated with this bound), or holds over \
     5,000 spans"
);
error_response!(
    /// 415 of `POST /v1/traces`.
    OtlpUnsupported,
    "The body is not application/x-protobuf or application/json, or its Content-Encoding is not gzip"
);
error_response!(
    /// 500.
    Internal,
    "An internal error; details are in the server log, never in the answer"
);

/// 503 with `Retry-After`.
pub struct Busy;

impl<'s> ToResponse<'s> for Busy {
    fn response() -> (&'s str, RefOr<Response>) {
        let retry_after = HeaderBuilder::new()
            .schema(runlens_engine::openapi::raw(serde_json::json!({ "type": "integer", "minimum": 0 })))
            .description(Some("Seconds to wait before trying again"))
            .build();
        let response =
            error("Too many imports at once; try again after Retry-After").header("Retry-After", retry_after);
        ("Busy", RefOr::T(response.build()))
    }
}

/// 429 with `Retry-After` of an event stream or long-poll (see `server::live`).
pub struct TooManyStreams;

impl<'s> ToResponse<'s> for TooManyStreams {
    fn response() -> (&'s str, RefOr<Response>) {
        let retry_after = HeaderBuilder::new()
            .schema(runlens_engine::openapi::raw(serde_json::json!({ "type": "integer", "minimum": 0 })))
            .description(Some("Seconds to wait before trying again"))
            .build();
        let response = error(
            "The caller (a user or an API key) has as many event streams and long-polls open as allowed \
             (`--max-streams-per-client`); close one, or try again after Retry-After",
        )
        .header("Retry-After", retry_after);
        ("TooManyStreams", RefOr::T(response.build()))
    }
}

/// 401 with `WWW-Authenticate: Bearer`.
pub struct Unauthorized;

impl<'s> ToResponse<'s> for Unauthorized {
    fn response() -> (&'s str, RefOr<Response>) {
        let challenge = HeaderBuilder::new()
            .schema(runlens_engine::openapi::raw(serde_json::json!({ "type": "string", "const": "Bearer" })))
            .description(Some("Always `Bearer`: send an API key as `Authorization: Bearer rl_…`"))
            .build();
        let response = error(
            "No credentials, or an unknown or revoked API key: sign in, or send a key as `Authorization: Bearer rl_…`",
        )
        .header("WWW-Authenticate", challenge);
        ("Unauthorized", RefOr::T(response.build()))
    }
}

/// A set of the error answers above, named once for the operations that
/// give them all; an operation lists its set beside its own answers
/// (`responses((status = 200, …), BodyErrors, (status = 409, response = Conflict))`).
macro_rules! error_set {
    ($(#[doc = $doc:literal])* $name:ident: $($status:literal => $response:ty),+ $(,)?) => {
        $(#[doc = $doc])*
        pub struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<String, RefOr<Response>> {
                std::collections::BTreeMap::from([$((
                    $status.to_string(),
                    RefOr::Ref(Ref::from_response_name(<$response as ToResponse>::response().0)),
                )),+])
            }
        }
    };
}

error_set!(
    /// A read of one thing by its id: 404, 500.
    ReadErrors: 404 => NotFound, 500 => Internal
);
error_set!(
    /// A read with parameters of something that may not exist: 400, 404, 500.
    QueryErrors: 400 => BadRequest, 404 => NotFound, 500 => Internal
);
error_set!(
    /// A JSON body, through the guards every route has: 413, 415, 500.
    BodyErrors: 413 => TooLarge, 415 => UnsupportedMediaType, 500 => Internal
);
error_set!(
    /// A change of something in a run (a decision, a follow-up, an edit):
    /// 400, 403, 404, 409, 413, 415, 500.
    ChangeErrors: 400 => BadRequest, 403 => Forbidden, 404 => NotFound, 409 => Conflict,
        413 => TooLarge, 415 => UnsupportedMediaType, 500 => Internal
);
