//! The global tier's families (`infergate global`), in a registry of their own: the tier runs
//! as its own process and exports none of the cluster tier's families. Every family is listed in
//! `docs/global.md`, and a test checks the page against [`GlobalMetrics::catalog`].
//!
//! The member label's values are the configured member names, so its cardinality is the
//! config's member count.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

use crate::catalog::{FamilyInfo, Registrar};
use crate::metrics::{Buckets, LATENCY};

/// A member.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabel {
    /// Its configured name.
    pub member: String,
}

/// A member and one part of its score.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScoreLabels {
    /// Its configured name.
    pub member: String,
    /// `total`, `kv_headroom`, `queue_depth`, `region_proximity` or `error_rate`.
    pub part: String,
}

/// A model name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabel {
    /// The model (or adapter) name, as the members' statuses list it.
    pub model: String,
}

/// An answer's status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// The HTTP status code.
    pub code: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// A member's state as the front reads it when `/metrics` is served.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemberGauges {
    /// A candidate now.
    pub up: bool,
    /// Age of its last status, if it has one.
    pub status_age: Option<Duration>,
    /// Its slow-start weight (0 when not a candidate).
    pub ramp_weight: f64,
    /// Its last score's parts, `[total, kv_headroom, queue_depth, region_proximity,
    /// error_rate]`, if it was scored.
    pub score: Option<[f64; 5]>,
}

/// The names of a score's parts, in [`MemberGauges::score`]'s order.
pub const SCORE_PARTS: [&str; 5] = [
    "total",
    "kv_headroom",
    "queue_depth",
    "region_proximity",
    "error_rate",
];

/// One member's series the request path writes, taken from their families once, so a request
/// neither builds a label nor looks a series up. The histograms' series appear at their first
/// observation, as a family's would.
#[derive(Debug)]
struct MemberSeries {
    sent: Counter,
    failovers: Counter,
    ejections: Counter,
    pull_failures: Counter,
    label: MemberLabel,
    first_byte: OnceLock<Histogram>,
    ttft: OnceLock<Histogram>,
}

/// The global tier's families.
#[derive(Debug)]
pub struct GlobalMetrics {
    /// Member `i`'s series, by its index in the config.
    members: Vec<MemberSeries>,
    up: Family<MemberLabel, Gauge>,
    status_age: Family<MemberLabel, FloatGauge>,
    ramp_weight: Family<MemberLabel, FloatGauge>,
    score: Family<ScoreLabels, FloatGauge>,
    sent: Family<MemberLabel, Counter>,
    failovers: Family<MemberLabel, Counter>,
    ejections: Family<MemberLabel, Counter>,
    pull_failures: Family<MemberLabel, Counter>,
    first_byte: Family<MemberLabel, Histogram, Buckets>,
    ttft: Family<MemberLabel, Histogram, Buckets>,
    requests: Family<CodeLabel, Counter>,
    duration: Histogram,
    drift: Family<ModelLabel, Gauge>,
    registry: Registry,
    catalog: Vec<FamilyInfo>,
}

impl GlobalMetrics {
    /// The families, with a series for each of `members` from the start (so a member that is
    /// never sent anything still shows 0 rather than nothing).
    pub fn new(members: &[String]) -> Self {
        let mut m = Self {
            members: Vec::new(),
            up: Family::default(),
            status_age: Family::default(),
            ramp_weight: Family::default(),
            score: Family::default(),
            sent: Family::default(),
            failovers: Family::default(),
            ejections: Family::default(),
            pull_failures: Family::default(),
            first_byte: Family::new_with_constructor(LATENCY),
            ttft: Family::new_with_constructor(LATENCY),
            requests: Family::default(),
            duration: LATENCY.histogram(),
            drift: Family::default(),
            registry: Registry::default(),
            catalog: Vec::new(),
        };
        let mut root = Registry::default();
        let mut catalog = Vec::new();
        let r = &mut Registrar {
            registry: root.sub_registry_with_prefix("infergate_global"),
            prefix: "infergate_global_",
            catalog: &mut catalog,
        };
        r.register(
            "member_up",
            "1 while the member is a candidate (fresh status, not ejected), else 0",
            m.up.clone(),
        );
        r.register(
            "member_status_age_seconds",
            "Age of the member's last status document that advanced",
            m.status_age.clone(),
        );
        r.register(
            "member_ramp_weight",
            "The member's slow-start weight: 1 whole, below 1 ramping back, 0 out",
            m.ramp_weight.clone(),
        );
        r.register(
            "member_score",
            "The member's last score and its parts, each in [0, 1]",
            m.score.clone(),
        );
        r.register(
            "member_requests",
            "Attempts sent to the member (its share of traffic)",
            m.sent.clone(),
        );
        r.register(
            "member_failovers",
            "Attempts at the member that failed before its answer began and moved to the next member",
            m.failovers.clone(),
        );
        r.register(
            "member_ejections",
            "Times outlier detection ejected the member",
            m.ejections.clone(),
        );
        r.register(
            "member_status_pull_failures",
            "Status pulls of the member that failed or timed out",
            m.pull_failures.clone(),
        );
        r.register(
            "member_first_byte_seconds",
            "Time from sending an attempt to the member's response headers",
            m.first_byte.clone(),
        );
        r.register(
            "time_to_first_token_seconds",
            "Time from a request's arrival at the tier to the first chunk of its answer's body (a stream's first event), by the member that answered",
            m.ttft.clone(),
        );
        r.register(
            "requests",
            "Requests the tier answered, by status code (its own refusals included)",
            m.requests.clone(),
        );
        r.register(
            "request_duration_seconds",
            "Time from a request's arrival to the tier's response headers",
            m.duration.clone(),
        );
        r.register(
            "model_drift",
            "Per model the members serve: 1 when they define it differently (models, adapters or routing), else 0",
            m.drift.clone(),
        );
        m.members = members
            .iter()
            .map(|name| {
                let label = MemberLabel {
                    member: name.clone(),
                };
                let _ = m.up.get_or_create(&label);
                MemberSeries {
                    sent: m.sent.get_or_create(&label).clone(),
                    failovers: m.failovers.get_or_create(&label).clone(),
                    ejections: m.ejections.get_or_create(&label).clone(),
                    pull_failures: m.pull_failures.get_or_create(&label).clone(),
                    label,
                    first_byte: OnceLock::new(),
                    ttft: OnceLock::new(),
                }
            })
            .collect();
        m.registry = root;
        m.catalog = catalog;
        m
    }

    /// An attempt was sent to member `index`.
    pub fn sent(&self, index: usize) {
        if let Some(m) = self.members.get(index) {
            m.sent.inc();
        }
    }

    /// An attempt at member `index` failed and the request moved on.
    pub fn failover(&self, index: usize) {
        if let Some(m) = self.members.get(index) {
            m.failovers.inc();
        }
    }

    /// Member `index` was ejected.
    pub fn ejected(&self, index: usize) {
        if let Some(m) = self.members.get(index) {
            m.ejections.inc();
        }
    }

    /// A status pull of member `index` failed.
    pub fn status_pull_failed(&self, index: usize) {
        if let Some(m) = self.members.get(index) {
            m.pull_failures.inc();
        }
    }

    /// Member `index`'s response headers came `after` the attempt was sent.
    pub fn first_byte(&self, index: usize, after: Duration) {
        if let Some(m) = self.members.get(index) {
            m.first_byte
                .get_or_init(|| self.first_byte.get_or_create(&m.label).clone())
                .observe(after.as_secs_f64());
        }
    }

    /// The first chunk of member `index`'s answer reached the tier `after` the request arrived.
    pub fn first_token(&self, index: usize, after: Duration) {
        if let Some(m) = self.members.get(index) {
            m.ttft
                .get_or_init(|| self.ttft.get_or_create(&m.label).clone())
                .observe(after.as_secs_f64());
        }
    }

    /// The tier answered `code` after `after`.
    pub fn answered(&self, code: u16, after: Duration) {
        self.requests
            .get_or_create(&CodeLabel {
                code: code.to_string(),
            })
            .inc();
        self.duration.observe(after.as_secs_f64());
    }

    /// Sets member `index`'s gauges (the front calls this for each member before encoding).
    pub fn set_member(&self, index: usize, g: MemberGauges) {
        let Some(l) = self.members.get(index).map(|m| &m.label) else {
            return;
        };
        self.up.get_or_create(l).set(i64::from(g.up));
        if let Some(age) = g.status_age {
            self.status_age.get_or_create(l).set(age.as_secs_f64());
        }
        self.ramp_weight.get_or_create(l).set(g.ramp_weight);
        if let Some(parts) = g.score {
            for (part, v) in SCORE_PARTS.iter().zip(parts) {
                self.score
                    .get_or_create(&ScoreLabels {
                        member: l.member.clone(),
                        part: (*part).to_string(),
                    })
                    .set(v);
            }
        }
    }

    /// Every model the members serve, with whether its members disagree now (1) or not (0); a
    /// model no longer served loses its series.
    pub fn set_drift<'a>(&self, models: impl IntoIterator<Item = (&'a str, bool)>) {
        self.drift.clear();
        for (model, drifted) in models {
            self.drift
                .get_or_create(&ModelLabel {
                    model: model.to_owned(),
                })
                .set(i64::from(drifted));
        }
    }

    /// Every family registered, as a query names it.
    pub fn catalog(&self) -> &[FamilyInfo] {
        &self.catalog
    }

    /// Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
