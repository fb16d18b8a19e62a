//! What a finished span holds, as the exporter sends it: the data, apart from the [`crate::Span`]
//! that records it and the exporter that ships it.

use std::time::SystemTime;

use crate::context::{SpanContext, SpanId};

/// What a span stands for, in OpenTelemetry's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A step inside infergate.
    Internal,
    /// A request infergate serves.
    Server,
    /// A request infergate makes (to a model server).
    Client,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Text.
    Str(String),
    /// A flag.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A measure.
    Float(f64),
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_owned())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<u16> for Value {
    fn from(v: u16) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Float(v)
    }
}

/// A finished span, as the exporter sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// Its trace, id and flags.
    pub context: SpanContext,
    /// The span it is a step of; `None` for a trace's first span.
    pub parent: Option<SpanId>,
    /// Its name.
    pub name: String,
    /// Its kind.
    pub kind: SpanKind,
    /// When it started (wall clock).
    pub start: SystemTime,
    /// When it ended: the start plus the monotonic time between, so a clock step never makes a
    /// span negative.
    pub end: SystemTime,
    /// Its attributes, in the order set (a key set twice is sent once, with its last value).
    pub attributes: Vec<(&'static str, Value)>,
    /// Set when the step failed: why.
    pub error: Option<String>,
}
