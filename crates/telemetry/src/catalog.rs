//! The catalogue of every exported family, kept as each is registered, so that the metrics
//! documentation can be checked against what the gateway really exports (and the other way).

use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Metric, Registry};

/// One exported family as a query names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyInfo {
    /// The name a query uses: a counter's with its `_total`, a histogram's without `_bucket`.
    pub name: String,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// The help text.
    pub help: String,
}

/// Registers families in one registry under one prefix, cataloguing each.
pub(crate) struct Registrar<'a> {
    pub(crate) registry: &'a mut Registry,
    /// The prefix the registry adds, with its `_` (empty for upstream names).
    pub(crate) prefix: &'static str,
    pub(crate) catalog: &'a mut Vec<FamilyInfo>,
}

impl Registrar<'_> {
    /// Registers `metric` as `name` and catalogues it.
    pub(crate) fn register<M: Metric + TypedMetric>(&mut self, name: &str, help: &str, metric: M) {
        let (kind, suffix) = match M::TYPE {
            MetricType::Counter => ("counter", "_total"),
            MetricType::Gauge => ("gauge", ""),
            MetricType::Histogram => ("histogram", ""),
            MetricType::Info => ("info", "_info"),
            MetricType::Unknown => ("unknown", ""),
        };
        self.catalog.push(FamilyInfo {
            name: format!("{}{name}{suffix}", self.prefix),
            kind,
            help: help.to_owned(),
        });
        self.registry.register(name, help, metric);
    }
}
