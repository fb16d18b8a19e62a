//! Request families under the names GIE's endpoint picker (v1.5.0) and llm-d export, with their
//! types, labels, units and buckets, so the dashboards and alerts users already run against those
//! work against infergate unchanged. Only families whose meaning infergate matches exactly are
//! here; `docs/metrics.md` lists them beside infergate's own.
//!
//! Their counting rules are upstream's: `inference_objective_request_total` counts requests that
//! were scheduled (sent to an endpoint), and a request refused before that appears only in
//! `inference_objective_request_error_total`, so arrivals are the sum of the two.

use crate::catalog::Registrar;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

use crate::fleet::FloatGauge;

/// `model_name, target_model_name`: the model the client asked for and the one it was sent to
/// (they differ when a canary rule or the rewrite header rewrote it).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectiveLabels {
    /// The model the client asked for.
    pub model_name: String,
    /// The model the request was routed by.
    pub target_model_name: String,
}

/// A scheduled request's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectiveRequestLabels {
    /// The model the client asked for.
    pub model_name: String,
    /// The model the request was routed by.
    pub target_model_name: String,
    /// The upstream priority of the request's band (Critical 1, Standard 0, Sheddable -1).
    pub priority: String,
}

/// A failed or refused request's labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectiveErrorLabels {
    /// The model the client asked for.
    pub model_name: String,
    /// The model the request was routed by.
    pub target_model_name: String,
    /// Upstream's error code ([`error_code`]).
    pub error_code: String,
}

/// `model_name` alone.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelNameLabels {
    /// The model the client asked for.
    pub model_name: String,
}

/// llm-d's time-to-first-token labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TtftLabels {
    /// The model the client asked for.
    pub model_name: String,
    /// The model the request was routed by.
    pub target_model_name: String,
    /// The tenant (folded into `other` beyond the cap).
    pub fairness_id: String,
    /// The upstream priority of the request's band.
    pub priority: String,
    /// `true` for a streamed answer (time to its first chunk), `false` for a buffered one
    /// (its whole duration).
    pub streaming: String,
}

/// GIE's flow-control pool label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InferencePoolLabels {
    /// The pool.
    pub inference_pool: String,
}

/// Histogram buckets given as a list, for `Family`.
#[derive(Clone, Copy, Debug)]
pub struct Bounds(&'static [f64]);

impl MetricConstructor<Histogram> for Bounds {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

/// GIE's request-duration buckets, 5 ms to an hour.
const DURATION: Bounds = Bounds(&[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0, 600.0, 900.0,
    1200.0, 1800.0, 2700.0, 3600.0,
]);

/// GIE's token-count buckets.
const TOKENS: Bounds = Bounds(&[
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
    32768.0, 65536.0, 131072.0, 262144.0, 524288.0, 1048576.0,
]);

/// GIE's normalized time-per-output-token buckets, 1 ms to 10 s.
const NTPOT: Bounds = Bounds(&[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
]);

/// llm-d's time-to-first-token buckets, 5 ms to 120 s.
const TTFT: Bounds = Bounds(&[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
]);

/// GIE's scheduler buckets, 100 µs to 100 ms.
const SCHEDULER: &[f64] = &[
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
];

/// Upstream's `error_code` for a request that got `status` without reaching a model server
/// (`scheduled` false), or whose model server answered `status` (`scheduled` true).
pub fn error_code(status: u16, scheduled: bool) -> &'static str {
    if scheduled {
        return "ModelServerError";
    }
    match status {
        400 | 405 | 411 | 413 | 415 | 422 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        429 => "ResourceExhausted",
        503 => "ServiceUnavailable",
        500 => "Internal",
        _ => "Unknown",
    }
}

/// The request families under upstream names.
#[derive(Debug)]
pub struct UpstreamRequests {
    /// `inference_objective_request_total`: scheduled requests.
    pub requests: Family<ObjectiveRequestLabels, Counter>,
    /// `inference_objective_request_error_total`: refused or failed requests.
    pub errors: Family<ObjectiveErrorLabels, Counter>,
    /// `inference_objective_request_duration_seconds`: arrival to the last response byte.
    pub duration: Family<ObjectiveLabels, Histogram, Bounds>,
    /// `inference_objective_input_tokens`, from `usage`.
    pub input_tokens: Family<ObjectiveLabels, Histogram, Bounds>,
    /// `inference_objective_output_tokens`, from `usage`.
    pub output_tokens: Family<ObjectiveLabels, Histogram, Bounds>,
    /// `inference_objective_prompt_cached_tokens`, from `usage`.
    pub cached_tokens: Family<ObjectiveLabels, Histogram, Bounds>,
    /// `inference_objective_normalized_time_per_output_token_seconds`: duration ÷ output tokens.
    pub ntpot: Family<ObjectiveLabels, Histogram, Bounds>,
    /// `inference_objective_running_requests`: responses in flight.
    pub running: Family<ModelNameLabels, Gauge>,
    /// `llm_d_epp_request_ttft_seconds`: arrival to the first response byte.
    pub ttft: Family<TtftLabels, Histogram, Bounds>,
    /// `inference_extension_scheduler_e2e_duration_seconds`: one pick.
    pub scheduler: Histogram,
    /// `inference_extension_flow_control_pool_saturation`: 0 empty … 1 saturated.
    pub pool_saturation: Family<InferencePoolLabels, FloatGauge>,
}

impl Default for UpstreamRequests {
    fn default() -> Self {
        Self {
            requests: Family::default(),
            errors: Family::default(),
            duration: Family::new_with_constructor(DURATION),
            input_tokens: Family::new_with_constructor(TOKENS),
            output_tokens: Family::new_with_constructor(TOKENS),
            cached_tokens: Family::new_with_constructor(TOKENS),
            ntpot: Family::new_with_constructor(NTPOT),
            running: Family::default(),
            ttft: Family::new_with_constructor(TTFT),
            scheduler: Histogram::new(SCHEDULER.iter().copied()),
            pool_saturation: Family::default(),
        }
    }
}

impl UpstreamRequests {
    pub(crate) fn register(&self, r: &mut Registrar<'_>) {
        r.register(
            "inference_objective_request",
            "Requests scheduled to a model server",
            self.requests.clone(),
        );
        r.register(
            "inference_objective_request_error",
            "Requests refused or failed, by upstream error code",
            self.errors.clone(),
        );
        r.register(
            "inference_objective_request_duration_seconds",
            "Request arrival to the last response byte",
            self.duration.clone(),
        );
        r.register(
            "inference_objective_input_tokens",
            "Prompt tokens per request (from usage)",
            self.input_tokens.clone(),
        );
        r.register(
            "inference_objective_output_tokens",
            "Generated tokens per request (from usage)",
            self.output_tokens.clone(),
        );
        r.register(
            "inference_objective_prompt_cached_tokens",
            "Prompt tokens served from the prefix cache per request (from usage)",
            self.cached_tokens.clone(),
        );
        r.register(
            "inference_objective_normalized_time_per_output_token_seconds",
            "Request duration divided by its output tokens",
            self.ntpot.clone(),
        );
        r.register(
            "inference_objective_running_requests",
            "Responses in flight",
            self.running.clone(),
        );
        r.register(
            "llm_d_epp_request_ttft_seconds",
            "Request arrival to the first response byte (the whole duration for a buffered answer)",
            self.ttft.clone(),
        );
        r.register(
            "inference_extension_scheduler_e2e_duration_seconds",
            "Time to pick an endpoint",
            self.scheduler.clone(),
        );
        r.register(
            "inference_extension_flow_control_pool_saturation",
            "Pool saturation as flow control sees it (0 empty, 1 saturated)",
            self.pool_saturation.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_take_upstreams_codes_and_model_server_answers_are_theirs() {
        assert_eq!(error_code(429, false), "ResourceExhausted");
        assert_eq!(error_code(429, true), "ModelServerError");
        assert_eq!(error_code(404, false), "NotFound");
        assert_eq!(error_code(401, false), "Unauthorized");
        assert_eq!(error_code(503, false), "ServiceUnavailable");
        assert_eq!(error_code(413, false), "BadRequest");
        assert_eq!(error_code(504, false), "Unknown");
    }
}
