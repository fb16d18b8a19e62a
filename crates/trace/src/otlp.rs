//! The OTLP trace messages infergate sends, declared by hand with the field numbers of
//! `opentelemetry/proto/collector/trace/v1/trace_service.proto` and the files it imports
//! (only the fields infergate writes; a receiver skips none it needs). Encoded with prost.
//!
//! Declaring the few messages here keeps the OpenTelemetry SDK, and its own runtime, out of
//! the binary.

use std::time::{Duration, UNIX_EPOCH};

use prost::Message;

use crate::record::{SpanKind, SpanRecord, Value};

/// `ExportTraceServiceRequest`.
#[derive(Clone, PartialEq, Message)]
pub struct ExportTraceServiceRequest {
    /// Spans by the resource that made them.
    #[prost(message, repeated, tag = "1")]
    pub resource_spans: Vec<ResourceSpans>,
}

/// `ResourceSpans`.
#[derive(Clone, PartialEq, Message)]
pub struct ResourceSpans {
    /// The process the spans come from.
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    /// Its spans, by instrumentation scope.
    #[prost(message, repeated, tag = "2")]
    pub scope_spans: Vec<ScopeSpans>,
}

/// `Resource`.
#[derive(Clone, PartialEq, Message)]
pub struct Resource {
    /// `service.name` and the others.
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeSpans`.
#[derive(Clone, PartialEq, Message)]
pub struct ScopeSpans {
    /// What recorded the spans.
    #[prost(message, optional, tag = "1")]
    pub scope: Option<InstrumentationScope>,
    /// The spans.
    #[prost(message, repeated, tag = "2")]
    pub spans: Vec<Span>,
}

/// `InstrumentationScope`.
#[derive(Clone, PartialEq, Message)]
pub struct InstrumentationScope {
    /// Its name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// Its version.
    #[prost(string, tag = "2")]
    pub version: String,
}

/// `Span`.
#[derive(Clone, PartialEq, Message)]
pub struct Span {
    /// 16 bytes.
    #[prost(bytes = "vec", tag = "1")]
    pub trace_id: Vec<u8>,
    /// 8 bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub span_id: Vec<u8>,
    /// W3C `tracestate`.
    #[prost(string, tag = "3")]
    pub trace_state: String,
    /// 8 bytes, empty for a root.
    #[prost(bytes = "vec", tag = "4")]
    pub parent_span_id: Vec<u8>,
    /// The span's name.
    #[prost(string, tag = "5")]
    pub name: String,
    /// `SpanKind`: 1 internal, 2 server, 3 client.
    #[prost(int32, tag = "6")]
    pub kind: i32,
    /// Nanoseconds since the Unix epoch.
    #[prost(fixed64, tag = "7")]
    pub start_time_unix_nano: u64,
    /// Nanoseconds since the Unix epoch.
    #[prost(fixed64, tag = "8")]
    pub end_time_unix_nano: u64,
    /// The span's attributes.
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    /// Its outcome.
    #[prost(message, optional, tag = "15")]
    pub status: Option<Status>,
    /// The W3C trace flags (bit 0: sampled).
    #[prost(fixed32, tag = "16")]
    pub flags: u32,
}

/// `Status`.
#[derive(Clone, PartialEq, Message)]
pub struct Status {
    /// Why it failed.
    #[prost(string, tag = "2")]
    pub message: String,
    /// 0 unset, 1 ok, 2 error.
    #[prost(int32, tag = "3")]
    pub code: i32,
}

/// `KeyValue`.
#[derive(Clone, PartialEq, Message)]
pub struct KeyValue {
    /// The attribute's name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Its value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue`.
#[derive(Clone, PartialEq, Message)]
pub struct AnyValue {
    /// One of the scalar kinds.
    #[prost(oneof = "any_value::Value", tags = "1, 2, 3, 4")]
    pub value: Option<any_value::Value>,
}

/// `AnyValue`'s kinds.
pub mod any_value {
    /// The scalar kinds infergate writes.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// `string_value`.
        #[prost(string, tag = "1")]
        StringValue(String),
        /// `bool_value`.
        #[prost(bool, tag = "2")]
        BoolValue(bool),
        /// `int_value`.
        #[prost(int64, tag = "3")]
        IntValue(i64),
        /// `double_value`.
        #[prost(double, tag = "4")]
        DoubleValue(f64),
    }
}

/// A string attribute.
pub fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
    }
}

/// The resource and scope every batch is sent under.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The resource's attributes (`service.name` first).
    pub resource: Vec<KeyValue>,
    /// The scope's version (infergate's).
    pub version: String,
}

/// One export request holding `spans` (moved in: their strings become the message's without
/// a copy).
pub fn encode(origin: &Origin, spans: Vec<SpanRecord>) -> Vec<u8> {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: origin.resource.clone(),
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "infergate".to_owned(),
                    version: origin.version.clone(),
                }),
                spans: spans.into_iter().map(span).collect(),
            }],
        }],
    }
    .encode_to_vec()
}

fn span(r: SpanRecord) -> Span {
    let nanos = |t: std::time::SystemTime| {
        t.duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_nanos() as u64
    };
    let SpanRecord {
        context,
        parent,
        name,
        kind,
        start,
        end,
        attributes,
        error,
    } = r;
    Span {
        trace_id: context.trace_id.0.to_vec(),
        span_id: context.span_id.0.to_vec(),
        trace_state: context.trace_state.unwrap_or_default(),
        parent_span_id: parent.map(|p| p.0.to_vec()).unwrap_or_default(),
        name,
        kind: match kind {
            SpanKind::Internal => 1,
            SpanKind::Server => 2,
            SpanKind::Client => 3,
        },
        start_time_unix_nano: nanos(start),
        end_time_unix_nano: nanos(end),
        attributes: attributes
            .into_iter()
            .map(|(k, v)| KeyValue {
                key: k.to_owned(),
                value: Some(AnyValue {
                    value: Some(match v {
                        Value::Str(s) => any_value::Value::StringValue(s),
                        Value::Bool(b) => any_value::Value::BoolValue(b),
                        Value::Int(i) => any_value::Value::IntValue(i),
                        Value::Float(f) => any_value::Value::DoubleValue(f),
                    }),
                }),
            })
            .collect(),
        status: error.map(|message| Status { message, code: 2 }),
        flags: u32::from(context.sampled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{SpanContext, SpanId, TraceId};

    #[test]
    fn a_span_encodes_with_the_protocols_field_numbers() {
        let start = UNIX_EPOCH + Duration::from_nanos(1_000);
        let record = SpanRecord {
            context: SpanContext {
                trace_id: TraceId([1; 16]),
                span_id: SpanId([2; 8]),
                sampled: true,
                trace_state: None,
            },
            parent: Some(SpanId([3; 8])),
            name: "infergate.pick".to_owned(),
            kind: SpanKind::Internal,
            start,
            end: start + Duration::from_nanos(500),
            attributes: vec![("n", Value::Int(5))],
            error: Some("no endpoint".to_owned()),
        };
        let origin = Origin {
            resource: vec![string("service.name", "infergate")],
            version: "0.1.0".to_owned(),
        };
        let bytes = encode(&origin, vec![record]);
        let back = ExportTraceServiceRequest::decode(bytes.as_slice()).unwrap();
        let s = &back.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(s.trace_id, vec![1; 16]);
        assert_eq!(s.parent_span_id, vec![3; 8]);
        assert_eq!(s.start_time_unix_nano, 1_000);
        assert_eq!(s.end_time_unix_nano, 1_500);
        assert_eq!(s.status.as_ref().unwrap().code, 2);
        // The span's start time is field 7, fixed64: tag byte (7 << 3) | 1, then 1000 LE.
        let needle = [0x39, 0xe8, 0x03, 0, 0, 0, 0, 0, 0];
        assert!(bytes.windows(needle.len()).any(|w| w == needle));
    }
}
