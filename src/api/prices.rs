//! Server functions of the settings page: the price table per model.
//!
//! Prices are USD per million tokens. The form sends every price as text so
//! that a mistyped one comes back as a readable error naming the field; a
//! blank cache or reasoning price defaults to the input or output price (see
//! `runlens_engine::cost::PriceInput`).

use leptos::prelude::*;
use runlens_engine::cost::{ModelPrice, MAX_PRICE};

/// Parses one price field of the form; blank is `None`.
pub fn parse_price(label: &str, text: &str) -> Result<Option<f64>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(v) if (0.0..=MAX_PRICE).contains(&v) => Ok(Some(v)),
        Ok(v) if v.is_finite() => Err(format!("{label}: {text} is outside 0 to {MAX_PRICE} USD per million tokens")),
        _ => Err(format!("{label}: `{text}` is not a number (USD per million tokens)")),
    }
}

/// The price table, by model name.
#[server]
pub async fn list_prices() -> Result<Vec<ModelPrice>, ServerFnError> {
    let engine = super::ssr::engine()?;
    Ok(engine.pricing().await.map_err(super::ssr::to_server_error)?.prices)
}

/// Creates or replaces one model's price. Input and output prices are
/// required; validation errors (negative, absurdly high, not a number) come
/// back as the error message.
#[server]
pub async fn save_price(
    model: String,
    input: String,
    output: String,
    #[server(default)] cache_read: String,
    #[server(default)] cache_write: String,
    #[server(default)] reasoning: String,
) -> Result<ModelPrice, ServerFnError> {
    use runlens_engine::cost::PriceInput;

    let engine = super::ssr::engine()?;
    let required = |label: &str, text: &str| {
        parse_price(label, text)?.ok_or_else(|| format!("{label} is required (USD per million tokens)"))
    };
    let price = (|| {
        Ok::<_, String>(PriceInput {
            input: required("Input price", &input)?,
            output: required("Output price", &output)?,
            cache_read: parse_price("Cache-read price", &cache_read)?,
            cache_write: parse_price("Cache-write price", &cache_write)?,
            reasoning: parse_price("Reasoning price", &reasoning)?,
        })
    })()
    .map_err(|e| {
        ssr::bad_request();
        ServerFnError::new(e)
    })?;
    engine.set_price(model.trim(), price).await.map_err(|e| {
        if matches!(e, runlens_engine::EngineError::Invalid(_)) {
            ssr::bad_request();
        }
        super::ssr::to_server_error(e)
    })
}

/// Removes a model's price (its runs then show no cost).
#[server]
pub async fn delete_price(model: String) -> Result<(), ServerFnError> {
    let engine = super::ssr::engine()?;
    engine.delete_price(&model).await.map_err(super::ssr::to_server_error)
}

#[cfg(feature = "ssr")]
mod ssr {
    use axum::http::{header::ACCEPT, request::Parts, StatusCode};
    use leptos::prelude::use_context;

    /// Answers 400 to a hydrated page's call. A plain form post (it accepts
    /// HTML) is left alone: it must get the redirect back to the page.
    pub fn bad_request() {
        let form_post = use_context::<Parts>().is_some_and(|p| {
            p.headers.get(ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/html"))
        });
        if let (false, Some(response)) = (form_post, use_context::<leptos_axum::ResponseOptions>()) {
            response.set_status(StatusCode::BAD_REQUEST);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_or_name_the_field() {
        assert_eq!(parse_price("Input price", " 2.5 "), Ok(Some(2.5)));
        assert_eq!(parse_price("Input price", ""), Ok(None));
        let err = parse_price("Output price", "ten").unwrap_err();
        assert!(err.starts_with("Output price: `ten`"), "{err}");
        assert!(parse_price("x", "inf").is_err());
        assert!(parse_price("x", "NaN").is_err());
        assert_eq!(parse_price("Input price", "100000"), Ok(Some(MAX_PRICE)));
        let err = parse_price("Input price", "100000.5").unwrap_err();
        assert!(err.starts_with("Input price: 100000.5 is outside 0 to 100000"), "{err}");
        assert!(parse_price("Input price", "-1").unwrap_err().contains("outside 0 to 100000"));
    }
}
