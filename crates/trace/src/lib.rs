//! infergate's distributed tracing, for both fronts: the W3C trace context a request arrives
//! with and leaves with ([`context`]), whether a trace is recorded ([`sampler`]), the spans a
//! request's steps record ([`span`]), and their export over OTLP to a collector ([`export`],
//! encoded by [`otlp`]), configured by the standard `OTEL_*` variables ([`settings`]).
//!
//! Tracing is off unless an OTLP endpoint is named. Off, or for a request the sampler leaves
//! out, every span is a no-op that allocates nothing and the client's `traceparent` goes
//! upstream unchanged. A span never carries request text: prompts and completions stay out.
//!
//! Export never blocks a request: a finished span goes into a bounded queue, and when the queue
//! is full, or the collector refuses a batch, the spans are dropped and counted
//! (`infergate_trace_spans_dropped_total`).

#![forbid(unsafe_code)]

pub mod context;
pub mod export;
pub mod otlp;
pub mod record;
pub mod sampler;
pub mod settings;
pub mod span;

pub use context::{SpanContext, SpanId, TraceId};
pub use export::TraceCounters;
pub use record::{SpanKind, SpanRecord, Value};
pub use sampler::Sampler;
pub use settings::{Protocol, SettingsError, TraceSettings};
pub use span::{Span, Tracer};
