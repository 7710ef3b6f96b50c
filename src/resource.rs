//! Page data loaded on the server and handed to the browser: resources
//! whose values the browser decodes from JSON bytes, as server functions
//! decode their answers.
//!
//! Why: Leptos' default resource codec decodes with `serde_json::from_str`
//! and server functions with `from_slice`. Each reader instantiates every
//! `Deserialize` impl it reaches, so a type both loaded with the page and
//! fetched again (the trace, the runs list…) had its decoding compiled
//! twice into the browser bundle. With one reader it is compiled once.

use leptos::prelude::*;
use leptos::server::codee::{Decoder, Encoder};

/// JSON, decoded from the bytes of the text (see the module docs).
pub struct JsonBytes;

impl<T: serde::Serialize> Encoder<T> for JsonBytes {
    type Error = serde_json::Error;
    type Encoded = String;

    fn encode(val: &T) -> Result<String, serde_json::Error> {
        serde_json::to_string(val)
    }
}

impl<T: serde::de::DeserializeOwned> Decoder<T> for JsonBytes {
    type Error = serde_json::Error;
    type Encoded = str;

    fn decode(val: &str) -> Result<T, serde_json::Error> {
        serde_json::from_slice(val.as_bytes())
    }
}

/// A resource of the app (see the module docs).
pub type Res<T> = Resource<T, JsonBytes>;

/// `Resource::new`, decoded as the module docs say.
#[track_caller]
pub fn new<T, S, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Res<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
    S: PartialEq + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, false)
}

/// `Resource::new_blocking` (the response waits for it), decoded as the
/// module docs say.
#[track_caller]
pub fn new_blocking<T, S, Fut>(
    source: impl Fn() -> S + Send + Sync + 'static,
    fetcher: impl Fn(S) -> Fut + Send + Sync + 'static,
) -> Res<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
    S: PartialEq + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    Resource::new_with_options(source, fetcher, true)
}
