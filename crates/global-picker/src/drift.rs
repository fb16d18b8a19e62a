//! The drift check: the global tier assumes that every member serving a model serves it the
//! same way ("keep pool definitions in Git and identical across clusters"). For each model that
//! two or more members serve, the pools serving it are compared on what should not differ
//! between clusters: the model names routed there, the adapters, and how the pool picks
//! ([`crate::PoolStatus::routing`]). Endpoints, load and timeouts differ on purpose and are not
//! compared.

use std::collections::BTreeMap;

use crate::status::{MemberStatus, PoolStatus};

/// A pool's definition as compared across members.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Definition {
    /// Model names routed to the pool, sorted.
    pub models: Vec<String>,
    /// Its adapters, sorted.
    pub adapters: Vec<String>,
    /// How it picks, when the member says.
    pub routing: Option<String>,
}

impl Definition {
    fn of(p: &PoolStatus) -> Self {
        let mut models = p.models.clone();
        models.sort();
        let mut adapters = p.adapters.clone();
        adapters.sort();
        Self {
            models,
            adapters,
            routing: p.routing.clone(),
        }
    }
}

/// One model whose members disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    /// The model (or adapter) name.
    pub model: String,
    /// Each definition seen and the members that have it. Invariant: at least two.
    pub variants: Vec<(Definition, Vec<String>)>,
}

/// Every model served by two or more of `members` (name and last status) whose pools differ,
/// sorted by model.
pub fn drift<'a>(members: impl IntoIterator<Item = (&'a str, &'a MemberStatus)>) -> Vec<Drift> {
    let mut by_model: BTreeMap<&str, BTreeMap<Definition, Vec<String>>> = BTreeMap::new();
    for (name, status) in members {
        for pool in &status.pools {
            let definition = Definition::of(pool);
            for model in pool.models.iter().chain(&pool.adapters) {
                by_model
                    .entry(model.as_str())
                    .or_default()
                    .entry(definition.clone())
                    .or_default()
                    .push(name.to_owned());
            }
        }
    }
    by_model
        .into_iter()
        .filter(|(_, variants)| variants.len() > 1)
        .map(|(model, variants)| Drift {
            model: model.to_owned(),
            variants: variants.into_iter().collect(),
        })
        .collect()
}

impl Drift {
    /// One line for a person: the model and how each group of members defines it.
    pub fn describe(&self) -> String {
        let variants: Vec<String> = self
            .variants
            .iter()
            .map(|(d, members)| {
                format!(
                    "{} → models [{}], adapters [{}], {}",
                    members.join(", "),
                    d.models.join(", "),
                    d.adapters.join(", "),
                    d.routing.as_deref().unwrap_or("routing not reported")
                )
            })
            .collect();
        format!("model `{}` differs: {}", self.model, variants.join("; "))
    }
}
