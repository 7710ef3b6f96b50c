//! Two experiments of one dataset compared item by item (see
//! [`super::Experiments::compare`]).

use std::collections::{BTreeMap, HashMap, HashSet};

use super::prompt_of;
use crate::error::{EngineError, Result};
use crate::model::limits;
use crate::model::{ComparedItem, ExperimentComparison, ItemChange};

impl super::Experiments<'_> {
    /// Experiment `id` against `other` (both of `project`, on the same
    /// dataset) item by item: an item improved when the mean of its run's
    /// scores rose, regressed when it fell. The counts cover every item;
    /// the page (items of `change`, when given) follows the item id `after`.
    pub async fn compare(
        self,
        project: &str,
        id: &str,
        other: &str,
        change: Option<ItemChange>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<ExperimentComparison> {
        let base = self.get(project, id).await?;
        let other = self.get(project, other).await?;
        if base.dataset_id != other.dataset_id {
            return Err(EngineError::Invalid(format!(
                "with: experiment `{}` ran on dataset `{}`, this one on `{}`; compare experiments of one dataset",
                other.id, other.dataset_name, base.dataset_name
            )));
        }
        let store = self.rt.store.experiments();
        let of = |rows: Vec<(String, String, Option<f64>)>| -> BTreeMap<String, (String, Option<f64>)> {
            rows.into_iter().map(|(item, run, mean)| (item, (run, mean))).collect()
        };
        let (a, b) = (of(store.item_means(&base.id).await?), of(store.item_means(&other.id).await?));
        let mut all: Vec<&String> = a.keys().chain(b.keys()).collect::<HashSet<_>>().into_iter().collect();
        all.sort();
        let limit = limit.clamp(1, limits::MAX_LIST_LIMIT) as usize;
        let mut cmp = ExperimentComparison {
            base: base.clone(),
            other: other.clone(),
            improved: 0,
            regressed: 0,
            unchanged: 0,
            missing: 0,
            items: Vec::new(),
            next_cursor: None,
        };
        for item in all {
            let (ra, sa) = a.get(item).map(|(r, s)| (Some(r.clone()), *s)).unwrap_or_default();
            let (rb, sb) = b.get(item).map(|(r, s)| (Some(r.clone()), *s)).unwrap_or_default();
            let verdict = match (sa, sb) {
                (Some(x), Some(y)) if y - x > 1e-9 => ItemChange::Improved,
                (Some(x), Some(y)) if x - y > 1e-9 => ItemChange::Regressed,
                (Some(_), Some(_)) => ItemChange::Unchanged,
                _ => ItemChange::Missing,
            };
            match verdict {
                ItemChange::Improved => cmp.improved += 1,
                ItemChange::Regressed => cmp.regressed += 1,
                ItemChange::Unchanged => cmp.unchanged += 1,
                ItemChange::Missing => cmp.missing += 1,
            }
            let wanted = change.is_none_or(|c| c == verdict) && after.is_none_or(|a| item.as_str() > a);
            if !wanted {
                continue;
            }
            if cmp.items.len() == limit {
                cmp.next_cursor = cmp.items.last().map(|i: &ComparedItem| i.item_id.clone());
                continue;
            }
            cmp.items.push(ComparedItem {
                item_id: item.clone(),
                input: String::new(),
                base_run_id: ra,
                other_run_id: rb,
                base_score: sa,
                other_score: sb,
                change: verdict,
            });
        }
        // The inputs of the page's items, as the base experiment ran them (one read).
        let ids: Vec<String> = cmp.items.iter().map(|c| c.item_id.clone()).collect();
        let items = self.rt.store.datasets().dataset_items_of(&base.dataset_id, &ids, base.dataset_version).await?;
        let inputs: HashMap<String, String> = items.iter().map(|i| (i.id.clone(), prompt_of(i))).collect();
        for compared in &mut cmp.items {
            if let Some(input) = inputs.get(&compared.item_id) {
                compared.input = input.clone();
            }
        }
        Ok(cmp)
    }
}
