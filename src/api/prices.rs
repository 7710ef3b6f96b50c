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
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Viewer)?;
    Ok(engine.traces().pricing(&caller.project).await.map_err(super::ssr::to_server_error)?.prices)
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

    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Admin)?;
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
        super::ssr::set_status(axum::http::StatusCode::BAD_REQUEST);
        ServerFnError::new(e)
    })?;
    engine.traces().set_price_by(&caller.project, model.trim(), price, Some(&caller.actor)).await.map_err(|e| {
        let error = super::ssr::classify(e, "saving a price");
        if error.kind == super::ssr::ErrorKind::Invalid {
            super::ssr::set_status(error.status());
        }
        ServerFnError::new(error.message)
    })
}

/// Removes a model's price (its runs then show no cost).
#[server]
pub async fn delete_price(model: String) -> Result<(), ServerFnError> {
    let (engine, caller) = super::ssr::for_project(super::ssr::Role::Admin)?;
    engine
        .traces()
        .delete_price_by(&caller.project, &model, Some(&caller.actor))
        .await
        .map_err(super::ssr::to_server_error)
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
