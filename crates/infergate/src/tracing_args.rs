//! The tracing flag every front takes, read together with OpenTelemetry's `OTEL_*` variables.

use anyhow::Context as _;
use infergate_trace::TraceSettings;

/// Where spans go.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TracingArgs {
    /// Trace each request (a span per pipeline step and per upstream attempt, the client's
    /// `traceparent` continued, the model server's set) and export the spans over OTLP to this
    /// collector's base URL (`http://host:4318`; `/v1/traces` is appended). Without it,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` turn tracing on;
    /// `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, `OTEL_TRACES_SAMPLER`, `OTEL_SERVICE_NAME` and the
    /// others are honoured (docs/observability.md). Off by default.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

impl TracingArgs {
    /// The export settings, or `None` when tracing is off; a setting that cannot be honoured
    /// is an error naming it.
    pub fn settings(&self) -> anyhow::Result<Option<TraceSettings>> {
        TraceSettings::from_env(self.otlp_endpoint.as_deref()).context("tracing settings")
    }
}
