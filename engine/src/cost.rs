//! Prices per model and what token usage costs.
//!
//! Plain serde types and arithmetic with no runtime dependencies, so the
//! browser bundle can price usage with the same formula as the server.
//! Prices are USD per million tokens. Cached input and reasoning output are
//! priced on their own: `input_tokens` includes the cache reads (and cache
//! writes), `output_tokens` includes the reasoning tokens, so those parts are
//! taken out of the plain input/output before pricing — not counted twice.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Highest accepted price (USD per million tokens): catches unit mistakes.
pub use crate::model::limits::MAX_PRICE;
use crate::model::limits::MAX_PRICE_MODEL_CHARS;
use crate::model::{Run, Step, StepOutline, Usage};

/// One model's prices, USD per million tokens.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ModelPrice {
    pub model: String,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub input: f64,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub output: f64,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub cache_read: f64,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub cache_write: f64,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub reasoning: f64,
    #[serde(default)]
    pub updated_at: Option<DateTime<Utc>>,
}

/// The body of `PUT /api/prices/{model}`. Omitted cache prices default to
/// the input price, an omitted reasoning price to the output price.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceInput {
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub input: f64,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::price))]
    pub output: f64,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::optional_price))]
    pub cache_read: Option<f64>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::optional_price))]
    pub cache_write: Option<f64>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::model::openapi::optional_price))]
    pub reasoning: Option<f64>,
}

impl PriceInput {
    /// Checks the input and builds the price of `model`.
    pub fn into_price(self, model: &str) -> Result<ModelPrice, String> {
        if model.trim().is_empty()
            || model.chars().nth(MAX_PRICE_MODEL_CHARS).is_some()
            || model.chars().any(char::is_control)
        {
            return Err(format!("the model name must be 1-{MAX_PRICE_MODEL_CHARS} printable characters"));
        }
        let price = ModelPrice {
            model: model.to_owned(),
            input: self.input,
            output: self.output,
            cache_read: self.cache_read.unwrap_or(self.input),
            cache_write: self.cache_write.unwrap_or(self.input),
            reasoning: self.reasoning.unwrap_or(self.output),
            updated_at: None,
        };
        for (name, v) in price.fields() {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("`{name}` must be a non-negative number of USD per million tokens"));
            }
            if v > MAX_PRICE {
                return Err(format!("`{name}` is over {MAX_PRICE} USD per million tokens; prices are per million"));
            }
        }
        Ok(price)
    }
}

/// Token counts as priced. `cache_write` is not reported in [`Usage`] yet
/// (no provider wired in reports it), so it is zero when built from one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tokens {
    /// All input tokens, including cache reads and writes.
    pub input: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    /// All output tokens, including reasoning.
    pub output: u64,
    pub reasoning: u64,
}

impl From<&Usage> for Tokens {
    fn from(u: &Usage) -> Self {
        Tokens {
            input: u.input_tokens,
            cache_read: u.cache_read_tokens,
            cache_write: 0,
            output: u.output_tokens,
            reasoning: u.reasoning_tokens,
        }
    }
}

/// A cost split by kind of token, in USD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub input: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub output: f64,
    pub reasoning: f64,
    pub total: f64,
}

impl ModelPrice {
    fn fields(&self) -> [(&'static str, f64); 5] {
        [
            ("input", self.input),
            ("output", self.output),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
            ("reasoning", self.reasoning),
        ]
    }

    /// What `usage` costs at this price.
    pub fn cost(&self, usage: &Usage) -> Cost {
        self.cost_of(Tokens::from(usage))
    }

    /// Each kind of token at its own price, per million:
    /// `(input − cache_read − cache_write) × input price`,
    /// `cache_read × cache-read price`, `cache_write × cache-write price`,
    /// `(output − reasoning) × output price`, `reasoning × reasoning price`.
    /// Parts larger than their whole (bad provider data) are clamped, never
    /// priced twice.
    pub fn cost_of(&self, t: Tokens) -> Cost {
        let per = |n: u64, price: f64| n as f64 * price / 1_000_000.0;
        let cache_read = t.cache_read.min(t.input);
        let cache_write = t.cache_write.min(t.input - cache_read);
        let reasoning = t.reasoning.min(t.output);
        let mut c = Cost {
            input: per(t.input - cache_read - cache_write, self.input),
            cache_read: per(cache_read, self.cache_read),
            cache_write: per(cache_write, self.cache_write),
            output: per(t.output - reasoning, self.output),
            reasoning: per(reasoning, self.reasoning),
            total: 0.0,
        };
        c.total = c.input + c.cache_read + c.cache_write + c.output + c.reasoning;
        c
    }
}

/// The price table, with the lookup rule for model names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    pub prices: Vec<ModelPrice>,
}

impl Pricing {
    /// The price of `model`: an exact match, else the name after the provider
    /// prefix (`openai/gpt-4.1` is priced as `gpt-4.1`); `None` when unknown.
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        let exact = self.prices.iter().find(|p| p.model == model);
        exact.or_else(|| {
            let (_, bare) = model.rsplit_once('/')?;
            self.prices.iter().find(|p| p.model == bare)
        })
    }

    /// USD for `usage` on `model`; `None` when the model has no price.
    pub fn cost_usd(&self, model: &str, usage: &Usage) -> Option<f64> {
        Some(self.price(model)?.cost(usage).total)
    }

    /// A step's cost, priced on the model its request names (a run may
    /// change model between steps), else the run's model.
    pub fn step_cost_usd(&self, run_model: &str, step: &Step) -> Option<f64> {
        self.cost_usd(step.recorded_model().unwrap_or(run_model), &step.usage)
    }

    /// The same for a step of the outline (which carries the step's model).
    pub fn outline_cost_usd(&self, run_model: &str, step: &StepOutline) -> Option<f64> {
        self.cost_usd(step.model.as_deref().unwrap_or(run_model), &step.usage)
    }

    /// A run's cost from its usage total, priced on the run's model.
    pub fn run_cost_usd(&self, run: &Run) -> Option<f64> {
        self.cost_usd(&run.model, &run.usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price() -> ModelPrice {
        ModelPrice {
            model: "m".into(),
            input: 2.0,
            output: 8.0,
            cache_read: 0.5,
            cache_write: 2.5,
            reasoning: 10.0,
            updated_at: None,
        }
    }

    #[test]
    fn cached_and_reasoning_tokens_are_priced_separately() {
        let usage = Usage {
            input_tokens: 1_000_000,
            cache_read_tokens: 400_000,
            output_tokens: 500_000,
            reasoning_tokens: 200_000,
            ..Usage::default()
        };
        let c = price().cost(&usage);
        assert!((c.input - 1.2).abs() < 1e-9, "600k fresh input × $2/M: {c:?}");
        assert!((c.cache_read - 0.2).abs() < 1e-9, "400k cached × $0.5/M");
        assert!((c.output - 2.4).abs() < 1e-9, "300k visible output × $8/M");
        assert!((c.reasoning - 2.0).abs() < 1e-9, "200k reasoning × $10/M");
        assert!((c.total - 5.8).abs() < 1e-9);
    }

    #[test]
    fn cache_writes_and_bad_counts() {
        let t = Tokens { input: 1000, cache_read: 200, cache_write: 300, output: 10, reasoning: 0 };
        let c = price().cost_of(t);
        assert!((c.input - 500.0 * 2.0 / 1e6).abs() < 1e-12);
        assert!((c.cache_write - 300.0 * 2.5 / 1e6).abs() < 1e-12);
        // More cached (or reasoning) tokens than in total: clamped, never negative.
        let c = price().cost_of(Tokens { input: 10, cache_read: 50, cache_write: 5, output: 1, reasoning: 9 });
        assert_eq!(c.input, 0.0);
        assert_eq!(c.cache_write, 0.0);
        assert!((c.cache_read - 10.0 * 0.5 / 1e6).abs() < 1e-12);
        assert!((c.reasoning - 10.0 / 1e6).abs() < 1e-12);
        assert_eq!(price().cost(&Usage::default()).total, 0.0);
    }

    #[test]
    fn prices_are_validated_and_defaulted() {
        let p = PriceInput { input: 3.0, output: 15.0, ..PriceInput::default() }.into_price("claude").unwrap();
        assert_eq!((p.cache_read, p.cache_write, p.reasoning), (3.0, 3.0, 15.0));
        assert!(PriceInput { input: -1.0, ..PriceInput::default() }.into_price("m").unwrap_err().contains("`input`"));
        assert!(PriceInput { cache_read: Some(f64::NAN), ..PriceInput::default() }.into_price("m").is_err());
        assert!(PriceInput::default().into_price(" ").is_err());
        assert!(PriceInput { output: 1e9, ..PriceInput::default() }.into_price("m").is_err());
    }

    #[test]
    fn provider_prefixes_fall_back_to_the_bare_model() {
        let pricing = Pricing { prices: vec![price(), ModelPrice { model: "openai/m".into(), input: 1.0, ..price() }] };
        assert_eq!(pricing.price("openai/m").unwrap().input, 1.0);
        assert_eq!(pricing.price("other/m").unwrap().input, 2.0);
        assert!(pricing.price("unknown").is_none());
        let usage = Usage { input_tokens: 1_000_000, ..Usage::default() };
        assert_eq!(pricing.cost_usd("m", &usage), Some(2.0));
        assert_eq!(pricing.cost_usd("nope", &usage), None);
    }
}
