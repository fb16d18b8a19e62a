//! The gateway's own Prometheus metrics, served by the admin listener.
//!
//! Label values are bounded: pools come from the config, endpoints from discovery, and models and
//! tenants pass through a [`LabelCap`] (a request naming an unknown model is counted under
//! `model=""` in infergate's families; upstream's `model_name` keeps what the client asked for,
//! folded into `other` beyond the cap). Every family is listed in `docs/metrics.md`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::cap::LabelCap;
use crate::catalog::{FamilyInfo, Registrar};
use crate::fleet::FleetGauges;
pub use crate::fleet::PoolLabels;
use crate::upstream::{self, ObjectiveErrorLabels, ObjectiveRequestLabels, UpstreamRequests};

/// Labels of a request count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The model the request named (adapter or base model); empty when unknown.
    pub model: String,
    /// The pool; empty when none was found.
    pub pool: String,
    /// The endpoint that answered, else the last one tried (a 504 or 503 names the endpoint
    /// that did not answer); empty when none was tried.
    pub endpoint: String,
    /// The HTTP status the client got.
    pub status: u16,
}

/// What is known of one inference request when it is counted, filled in as far as it got.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestRecord {
    /// The model the client asked for; empty before the body was parsed.
    pub asked_model: String,
    /// The model it was routed by (a rewrite's target); empty when routing found none.
    pub model: String,
    /// The pool; empty when none was found.
    pub pool: String,
    /// The endpoint that answered, else the last one tried; empty when none was.
    pub endpoint: String,
    /// The HTTP status the client got.
    pub status: u16,
    /// The upstream priority of its band (Critical 1, Standard 0, Sheddable -1).
    pub priority: i32,
}

/// Labels of a dropped-span count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TraceDropLabels {
    /// `queue_full` or `export_failed`.
    pub reason: &'static str,
}

/// Labels of a per-model series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    /// The model the request named.
    pub model: String,
}

/// Labels of a token count: per model and pool, so a pool's prefix-cache hit ratio is a ratio
/// of two sums.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// The model the request was routed by.
    pub model: String,
    /// The pool that served it.
    pub pool: String,
}

/// Labels of a rewrite count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RewriteLabels {
    /// The model the client asked for.
    pub model: String,
    /// The model the request was sent to.
    pub target: String,
}

/// Labels of a flow-control series of one band of one pool.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowBandLabels {
    /// The pool.
    pub pool: String,
    /// `Critical`, `Standard` or `Sheddable`.
    pub band: String,
}

/// Labels of a flow-control refusal count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FlowRejectionLabels {
    /// The pool.
    pub pool: String,
    /// `Critical`, `Standard` or `Sheddable`.
    pub band: String,
    /// The `x-llm-d-request-dropped-reason` value, like `rejected-saturated`.
    pub reason: String,
}

/// Labels of a per-endpoint series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    /// The pool.
    pub pool: String,
    /// The endpoint's address.
    pub endpoint: String,
}

/// Labels of a retry count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RetryLabels {
    /// The pool.
    pub pool: String,
    /// The endpoint that failed.
    pub endpoint: String,
    /// `connect` (no answer) or `status_503`.
    pub reason: String,
}

/// Labels of a stream that lost its endpoint mid-answer.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResumeLabels {
    /// The pool.
    pub pool: String,
    /// The endpoint that failed.
    pub endpoint: String,
    /// `resumed` (another endpoint went on with it), `finished` (every token was sent: the
    /// gateway wrote the end) or `failed` (it ended with an error event).
    pub outcome: String,
}

/// Builds a histogram with fixed buckets; a named type because `Family` needs one.
#[derive(Clone, Copy, Debug)]
pub struct Buckets {
    start: f64,
    factor: f64,
    count: u16,
}

impl Buckets {
    /// A histogram with these buckets.
    pub fn histogram(&self) -> Histogram {
        Histogram::new(exponential_buckets(self.start, self.factor, self.count))
    }
}

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        self.histogram()
    }
}

/// Latency buckets from 1 ms to about 9 minutes.
pub(crate) const LATENCY: Buckets = Buckets {
    start: 0.001,
    factor: 2.0,
    count: 20,
};

/// Picker decision buckets from 1 µs to about 0.5 s.
const DECISION: Buckets = Buckets {
    start: 1e-6,
    factor: 2.0,
    count: 20,
};

/// Every metric the gateway exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    catalog: Vec<FamilyInfo>,
    /// Requests answered, by model, pool, endpoint and status.
    pub requests: Family<RequestLabels, Counter>,
    /// Time to first token of streamed answers, by model.
    pub ttft: Family<ModelLabels, Histogram, Buckets>,
    /// Request start to last byte, by model.
    pub e2e: Family<ModelLabels, Histogram, Buckets>,
    /// Prompt tokens from `usage`, by model and pool.
    pub prompt_tokens: Family<TokenLabels, Counter>,
    /// Generated tokens from `usage`, by model and pool.
    pub completion_tokens: Family<TokenLabels, Counter>,
    /// Prompt tokens served from the prefix cache, from `usage`, by model and pool.
    pub cached_tokens: Family<TokenLabels, Counter>,
    /// Requests sent to each endpoint (fallbacks included).
    pub routing_decisions: Family<EndpointLabels, Counter>,
    /// Requests refused with 429 by flow control (shed at saturation, queue full, displaced).
    pub shed: Family<PoolLabels, Counter>,
    /// Requests waiting in flow control's queues, by pool and band.
    pub flow_queue_requests: Family<FlowBandLabels, Gauge>,
    /// Request bytes waiting in flow control's queues, by pool and band.
    pub flow_queue_bytes: Family<FlowBandLabels, Gauge>,
    /// Time admitted requests waited in the queue (0 for those admitted at once), by pool and
    /// band: with the queue sizes, the autoscaling signal.
    pub flow_queue_wait: Family<FlowBandLabels, Histogram, Buckets>,
    /// Requests refused by flow control, by pool, band and `x-llm-d-request-dropped-reason`.
    pub flow_rejections: Family<FlowRejectionLabels, Counter>,
    /// Attempts that failed before the first response byte and moved to a fallback.
    pub retries: Family<RetryLabels, Counter>,
    /// Streams whose endpoint failed after the client began to receive them, by outcome.
    pub stream_resumes: Family<ResumeLabels, Counter>,
    /// Largest minus smallest waiting queue over the pool's fresh endpoints.
    pub queue_spread: Family<PoolLabels, Gauge<f64, AtomicU64>>,
    /// Mean saturation of the pool (1 = at the detector's thresholds).
    pub saturation: Family<PoolLabels, Gauge<f64, AtomicU64>>,
    /// Scrapes that failed (connect, status, timeout or parse).
    pub scrape_errors: Family<EndpointLabels, Counter>,
    /// Ejections by outlier detection, by endpoint.
    pub ejections: Family<EndpointLabels, Counter>,
    /// 1 while an endpoint's metrics count as frozen (unchanged though requests were sent).
    pub metrics_frozen: Family<EndpointLabels, Gauge>,
    /// Time to pick and dispatch, by pool.
    pub picker_latency: Family<PoolLabels, Histogram, Buckets>,
    /// Responses streaming now.
    pub in_flight: Gauge,
    /// Config reloads, by outcome.
    pub reloads: Family<ReloadLabels, Counter>,
    /// JWT signing key set loads (file reads or URL fetches), by outcome.
    pub jwks_loads: Family<JwksLabels, Counter>,
    /// Signing keys in the current set.
    pub jwks_keys: Gauge,
    /// Requests refused by JWT auth, by error code.
    pub auth_refusals: Family<AuthLabels, Counter>,
    /// Rate-limit decisions, by tenant and outcome.
    pub rate_limit_decisions: Family<RateLimitLabels, Counter>,
    /// Calls to the shared rate-limit store that failed, by reason.
    pub rate_limit_store_errors: Family<StoreErrorLabels, Counter>,
    /// Tenants the local rate-limit store tracks (bounded; drained tenants are forgotten).
    pub rate_limit_tenants: Gauge,
    /// Requests whose model was rewritten (canary splits and the rewrite header), by the model
    /// asked for and the target; counted once routing accepted the target.
    pub rewrites: Family<RewriteLabels, Counter>,
    /// Endpoints each pool has now, from discovery (static or Kubernetes).
    pub pool_endpoints: Family<PoolLabels, Gauge>,
    /// Membership changes installed, by pool.
    pub membership_changes: Family<PoolLabels, Counter>,
    /// 1 while Kubernetes discovery has listed every resource it watches and its watches are
    /// live; 0 while it has not synced yet or lost the API server (serving the last known
    /// endpoints).
    pub discovery_synced: Gauge,
    /// Watch errors from the Kubernetes API, by resource (each one is followed by a retry, a
    /// re-list after `410 Gone`).
    pub discovery_watch_errors: Family<ResourceLabels, Counter>,
    /// Completed requests written to the trace capture (`--capture`).
    pub capture_records: Counter,
    /// Completed requests the trace capture dropped because its writer was behind (or closed).
    pub capture_dropped: Counter,
    /// Spans the OTLP collector took (tracing on).
    pub trace_spans_exported: Counter,
    /// Spans dropped before the collector took them, by why (`queue_full`: the export queue
    /// was full; `export_failed`: the collector refused or did not answer their batch).
    pub trace_spans_dropped: Family<TraceDropLabels, Counter>,
    /// The fleet as the picker sees it, rewritten at each read.
    pub fleet: FleetGauges,
    /// The HTTP front's client connections and buffered bodies.
    pub connections: crate::connections::ConnectionGauges,
    /// The request families under GIE's and llm-d's names.
    pub upstream: UpstreamRequests,
    /// Bounds the model labels.
    pub models: LabelCap,
    /// Bounds the tenant (`fairness_id`) labels.
    pub tenants: LabelCap,
}

/// Labels of a rate-limit decision.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RateLimitLabels {
    /// A tenant with limits of its own, or `*` for every tenant under the default limit (so
    /// the values are bounded by the config).
    pub tenant: String,
    /// `admitted`, `limited`, `failed_open` or `failed_closed`.
    pub outcome: String,
}

/// Labels of a rate-limit store error.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreErrorLabels {
    /// `timeout`, `connection`, `refused`, `protocol`, or `down` (failed at once, within the
    /// retry delay after a failure).
    pub reason: String,
}

/// Labels of a watched Kubernetes resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabels {
    /// The resource's plural (`pods`, `configmaps`, `inferencegatewayconfigs`).
    pub resource: String,
}

/// Labels of a JWKS load.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JwksLabels {
    /// `ok` or `error`.
    pub outcome: String,
}

/// Labels of an auth refusal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthLabels {
    /// The RFC 6750 error code (`invalid_token`, `insufficient_scope`, `invalid_request`),
    /// `missing_token`, or `keys_unavailable`.
    pub code: String,
}

/// Labels of a reload count.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `ok` or `error`.
    pub outcome: String,
}

impl Metrics {
    /// Every family: infergate's under the `infergate_` prefix, upstream's under their own names.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let m = Self {
            requests: Family::default(),
            ttft: Family::new_with_constructor(LATENCY),
            e2e: Family::new_with_constructor(LATENCY),
            prompt_tokens: Family::default(),
            completion_tokens: Family::default(),
            cached_tokens: Family::default(),
            routing_decisions: Family::default(),
            shed: Family::default(),
            flow_queue_requests: Family::default(),
            flow_queue_bytes: Family::default(),
            flow_queue_wait: Family::new_with_constructor(LATENCY),
            flow_rejections: Family::default(),
            retries: Family::default(),
            stream_resumes: Family::default(),
            queue_spread: Family::default(),
            saturation: Family::default(),
            scrape_errors: Family::default(),
            ejections: Family::default(),
            metrics_frozen: Family::default(),
            picker_latency: Family::new_with_constructor(DECISION),
            in_flight: Gauge::default(),
            reloads: Family::default(),
            jwks_loads: Family::default(),
            jwks_keys: Gauge::default(),
            auth_refusals: Family::default(),
            rate_limit_decisions: Family::default(),
            rate_limit_store_errors: Family::default(),
            rate_limit_tenants: Gauge::default(),
            rewrites: Family::default(),
            pool_endpoints: Family::default(),
            membership_changes: Family::default(),
            discovery_synced: Gauge::default(),
            discovery_watch_errors: Family::default(),
            capture_records: Counter::default(),
            capture_dropped: Counter::default(),
            trace_spans_exported: Counter::default(),
            trace_spans_dropped: Family::default(),
            fleet: FleetGauges::default(),
            connections: Default::default(),
            upstream: UpstreamRequests::default(),
            models: LabelCap::default(),
            tenants: LabelCap::default(),
            registry: Registry::default(),
            catalog: Vec::new(),
        };
        let mut catalog = Vec::new();
        let mut upstream = Registrar {
            registry: &mut root,
            prefix: "",
            catalog: &mut catalog,
        };
        m.upstream.register(&mut upstream);
        m.fleet.register_upstream(&mut upstream);
        let r = &mut Registrar {
            registry: root.sub_registry_with_prefix("infergate"),
            prefix: "infergate_",
            catalog: &mut catalog,
        };
        m.fleet.register_ours(r);
        m.connections.register(r);
        r.register("requests", "Requests answered", m.requests.clone());
        r.register(
            "capture_records",
            "Completed requests written to the trace capture",
            m.capture_records.clone(),
        );
        r.register(
            "capture_dropped",
            "Completed requests the trace capture dropped (writer behind or closed)",
            m.capture_dropped.clone(),
        );
        r.register(
            "trace_spans_exported",
            "Spans the OTLP collector took",
            m.trace_spans_exported.clone(),
        );
        r.register(
            "trace_spans_dropped",
            "Spans dropped before the collector took them, by reason",
            m.trace_spans_dropped.clone(),
        );
        r.register(
            "time_to_first_token_seconds",
            "Time to first token of streamed answers",
            m.ttft.clone(),
        );
        r.register(
            "e2e_request_latency_seconds",
            "Request arrival to last response byte",
            m.e2e.clone(),
        );
        r.register(
            "prompt_tokens",
            "Prompt tokens (from usage)",
            m.prompt_tokens.clone(),
        );
        r.register(
            "completion_tokens",
            "Generated tokens (from usage)",
            m.completion_tokens.clone(),
        );
        r.register(
            "cached_tokens",
            "Prompt tokens served from the prefix cache (from usage)",
            m.cached_tokens.clone(),
        );
        r.register(
            "routing_decisions",
            "Requests sent to each endpoint",
            m.routing_decisions.clone(),
        );
        r.register(
            "shed_requests",
            "Requests refused with 429 by flow control (shed at saturation, queue full, displaced)",
            m.shed.clone(),
        );
        r.register(
            "flow_queue_requests",
            "Requests waiting in flow control's queues",
            m.flow_queue_requests.clone(),
        );
        r.register(
            "flow_queue_bytes",
            "Request bytes waiting in flow control's queues",
            m.flow_queue_bytes.clone(),
        );
        r.register(
            "flow_queue_wait_seconds",
            "Time admitted requests waited in flow control's queue (0 when admitted at once)",
            m.flow_queue_wait.clone(),
        );
        r.register(
            "flow_rejections",
            "Requests refused by flow control, by band and dropped reason",
            m.flow_rejections.clone(),
        );
        r.register(
            "upstream_retries",
            "Attempts that failed before the first byte and moved to a fallback",
            m.retries.clone(),
        );
        r.register(
            "stream_resumes",
            "Streams whose endpoint failed mid-answer: resumed elsewhere, finished by the gateway, or failed",
            m.stream_resumes.clone(),
        );
        r.register(
            "pool_queue_spread",
            "Largest minus smallest waiting queue over fresh endpoints",
            m.queue_spread.clone(),
        );
        r.register(
            "pool_saturation",
            "Mean endpoint saturation (1 = at the thresholds)",
            m.saturation.clone(),
        );
        r.register(
            "scrape_errors",
            "Failed metrics scrapes",
            m.scrape_errors.clone(),
        );
        r.register(
            "endpoint_ejections",
            "Endpoints ejected by outlier detection (failed attempts in a row, or frozen metrics)",
            m.ejections.clone(),
        );
        r.register(
            "endpoint_metrics_frozen",
            "1 while the endpoint's metrics have not changed though requests were sent there",
            m.metrics_frozen.clone(),
        );
        r.register(
            "picker_latency_seconds",
            "Time to pick and dispatch",
            m.picker_latency.clone(),
        );
        r.register(
            "in_flight_responses",
            "Responses streaming now",
            m.in_flight.clone(),
        );
        r.register("config_reloads", "Config reloads", m.reloads.clone());
        r.register(
            "jwks_loads",
            "JWT signing key set loads (file reads or URL fetches), by outcome",
            m.jwks_loads.clone(),
        );
        r.register(
            "jwks_keys",
            "Signing keys in the current set",
            m.jwks_keys.clone(),
        );
        r.register(
            "auth_refusals",
            "Requests refused by JWT auth, by error code",
            m.auth_refusals.clone(),
        );
        r.register(
            "rewrites",
            "Requests whose model was rewritten, by the model asked for and the target",
            m.rewrites.clone(),
        );
        r.register(
            "rate_limit_decisions",
            "Rate-limit decisions, by tenant (* for the default limit) and outcome",
            m.rate_limit_decisions.clone(),
        );
        r.register(
            "rate_limit_store_errors",
            "Calls to the shared rate-limit store that failed, by reason",
            m.rate_limit_store_errors.clone(),
        );
        r.register(
            "rate_limit_tenants",
            "Tenants the local rate-limit store tracks",
            m.rate_limit_tenants.clone(),
        );
        r.register(
            "pool_endpoints",
            "Endpoints each pool has now, from discovery",
            m.pool_endpoints.clone(),
        );
        r.register(
            "membership_changes",
            "Membership changes installed into a pool",
            m.membership_changes.clone(),
        );
        r.register(
            "discovery_synced",
            "1 while Kubernetes discovery is synced and its watches live; 0 before the first sync or while the API server is lost",
            m.discovery_synced.clone(),
        );
        r.register(
            "discovery_watch_errors",
            "Kubernetes watch errors, by resource",
            m.discovery_watch_errors.clone(),
        );
        Self {
            registry: root,
            catalog,
            ..m
        }
    }

    /// Every family registered, in registration order.
    pub fn catalog(&self) -> &[FamilyInfo] {
        &self.catalog
    }

    /// Counts one inference request that ended (answered or refused) in `infergate_requests`
    /// and in upstream's request or error count.
    pub fn count_request(&self, r: &RequestRecord) {
        let model = self.models.fold(&r.model);
        let asked = if r.asked_model.is_empty() {
            model.clone()
        } else {
            self.models.fold(&r.asked_model)
        };
        let scheduled = !r.endpoint.is_empty();
        if scheduled {
            self.upstream
                .requests
                .get_or_create(&ObjectiveRequestLabels {
                    model_name: asked.clone(),
                    target_model_name: model.clone(),
                    priority: r.priority.to_string(),
                })
                .inc();
        }
        if !scheduled || r.status >= 400 {
            self.upstream
                .errors
                .get_or_create(&ObjectiveErrorLabels {
                    model_name: asked,
                    target_model_name: model.clone(),
                    error_code: upstream::error_code(r.status, scheduled).to_owned(),
                })
                .inc();
        }
        self.requests
            .get_or_create(&RequestLabels {
                model,
                pool: r.pool.clone(),
                endpoint: r.endpoint.clone(),
                status: r.status,
            })
            .inc();
    }

    /// Prometheus text exposition of every family.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
