//! The prices part of the store: each project's price table, by model name
//! (what a run's usage costs).

use async_trait::async_trait;

use crate::cost::ModelPrice;
use crate::error::Result;

#[async_trait]
pub trait PriceStore: Send + Sync {
    /// A project's price table, by model name.
    async fn prices(&self, project: &str) -> Result<Vec<ModelPrice>>;
    /// Creates or replaces one model's price in a project.
    async fn put_price(&self, project: &str, price: &ModelPrice) -> Result<()>;
    /// `false` when the model had no price in the project.
    async fn delete_price(&self, project: &str, model: &str) -> Result<bool>;
}
