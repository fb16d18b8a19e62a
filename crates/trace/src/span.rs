//! Spans: what one step of a request did, from when to when, with what attributes.
//!
//! A [`Span`] records only when its trace is sampled; otherwise it is empty, and every method
//! on it does nothing. A recording span is sent to the exporter when it ends: by
//! [`Span::end`], or when it is dropped (a request abandoned half-way still shows how far it
//! got).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use hyper::header::HeaderMap;
use tokio::sync::mpsc;

use crate::context::{SpanContext, SpanId, TraceId};
use crate::export::{self, Queue, TraceCounters};
pub use crate::record::{SpanKind, SpanRecord, Value};
use crate::sampler::Sampler;
use crate::settings::TraceSettings;

/// Makes spans and hands finished ones to the exporter. Cheap to clone; [`Tracer::disabled`]
/// makes only empty spans.
#[derive(Debug, Clone, Default)]
pub struct Tracer {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    sampler: Sampler,
    ids: Ids,
    queue: Queue,
}

/// Trace and span ids: a counter run through SplitMix64's mix from a seed taken at start, so
/// ids are unique within the process, spread over the whole space (the ratio sampler reads
/// them), and cost one atomic add.
#[derive(Debug)]
struct Ids {
    next: AtomicU64,
}

impl Ids {
    fn new() -> Self {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seed = now ^ u64::from(std::process::id()).rotate_left(32);
        Self {
            next: AtomicU64::new(infergate_rng::SplitMix64::new(seed).next_u64()),
        }
    }

    fn next(&self) -> u64 {
        loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let id = infergate_rng::SplitMix64::new(n).next_u64();
            if id != 0 {
                return id;
            }
        }
    }

    fn span(&self) -> SpanId {
        SpanId(self.next().to_be_bytes())
    }

    fn trace(&self) -> TraceId {
        let mut b = [0; 16];
        b[..8].copy_from_slice(&self.next().to_be_bytes());
        b[8..].copy_from_slice(&self.next().to_be_bytes());
        TraceId(b)
    }
}

impl Tracer {
    /// A tracer that records nothing.
    pub fn disabled() -> Self {
        Self::default()
    }

    /// A tracer exporting as `settings` say, counting into `counters`. Starts the exporter
    /// task, so must run inside a tokio runtime.
    pub fn start(settings: TraceSettings, counters: TraceCounters) -> Self {
        let sampler = settings.sampler.clone();
        let queue = export::start(settings, counters);
        Self {
            inner: Some(Arc::new(Inner {
                sampler,
                ids: Ids::new(),
                queue,
            })),
        }
    }

    /// A tracer whose finished spans go into `sender`, for tests of what is recorded.
    pub fn to_channel(sampler: Sampler, sender: mpsc::Sender<SpanRecord>) -> Self {
        Self {
            inner: Some(Arc::new(Inner {
                sampler,
                ids: Ids::new(),
                queue: Queue::channel(sender),
            })),
        }
    }

    /// Whether spans are recorded at all (an OTLP endpoint was named).
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// A request's first span here: continuing the trace `headers` carry (`traceparent`), or
    /// starting one. Empty when tracing is off or the sampler leaves the trace out.
    pub fn server_span(&self, name: impl Into<String>, headers: &HeaderMap) -> Span {
        let Some(inner) = &self.inner else {
            return Span::default();
        };
        let parent = SpanContext::from_headers(headers);
        let trace_id = parent
            .as_ref()
            .map_or_else(|| inner.ids.trace(), |p| p.trace_id);
        if !inner.sampler.samples(parent.as_ref(), trace_id) {
            return Span::default();
        }
        let context = SpanContext {
            trace_id,
            span_id: inner.ids.span(),
            sampled: true,
            trace_state: parent.as_ref().and_then(|p| p.trace_state.clone()),
        };
        Span::recording(
            Arc::clone(inner),
            context,
            parent.map(|p| p.span_id),
            name.into(),
            SpanKind::Server,
        )
    }

    /// Sends what is queued and waits (at most the export timeout) for the collector to take
    /// it: for a front's shutdown, after its drain.
    pub async fn flush(&self) {
        if let Some(inner) = &self.inner {
            inner.queue.flush().await;
        }
    }
}

/// One step of a traced request, or nothing (tracing off, or the trace not sampled).
#[derive(Debug, Default)]
pub struct Span {
    recording: Option<Box<Recording>>,
}

#[derive(Debug)]
struct Recording {
    tracer: Arc<Inner>,
    record: SpanRecord,
    started: Instant,
}

impl Span {
    fn recording(
        tracer: Arc<Inner>,
        context: SpanContext,
        parent: Option<SpanId>,
        name: String,
        kind: SpanKind,
    ) -> Self {
        let now = SystemTime::now();
        Self {
            recording: Some(Box::new(Recording {
                tracer,
                record: SpanRecord {
                    context,
                    parent,
                    name,
                    kind,
                    start: now,
                    // Set when the span ends.
                    end: now,
                    attributes: Vec::new(),
                    error: None,
                },
                started: Instant::now(),
            })),
        }
    }

    /// Whether this span records (so whatever only it would use is worth computing).
    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Where this span sits in its trace; `None` for an empty span.
    pub fn context(&self) -> Option<&SpanContext> {
        self.recording.as_ref().map(|r| &r.record.context)
    }

    /// A step of this span, starting now.
    pub fn child(&self, name: impl Into<String>, kind: SpanKind) -> Span {
        let Some(r) = &self.recording else {
            return Span::default();
        };
        let context = SpanContext {
            span_id: r.tracer.ids.span(),
            ..r.record.context.clone()
        };
        Span::recording(
            Arc::clone(&r.tracer),
            context,
            Some(r.record.context.span_id),
            name.into(),
            kind,
        )
    }

    /// Sets attribute `key` (replacing an earlier value).
    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        let Some(r) = &mut self.recording else {
            return;
        };
        let value = value.into();
        match r.record.attributes.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => r.record.attributes.push((key, value)),
        }
    }

    /// Marks the step failed, with why.
    pub fn fail(&mut self, message: impl Into<String>) {
        if let Some(r) = &mut self.recording {
            r.record.error = Some(message.into());
        }
    }

    /// Renames the span (once what it stands for is known).
    pub fn rename(&mut self, name: impl Into<String>) {
        if let Some(r) = &mut self.recording {
            r.record.name = name.into();
        }
    }

    /// Ends the span now.
    pub fn end(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if let Some(r) = self.recording.take() {
            let Recording {
                tracer,
                mut record,
                started,
            } = *r;
            record.end = record.start + started.elapsed();
            tracer.queue.push(record);
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn tracer(sampler: Sampler) -> (Tracer, mpsc::Receiver<SpanRecord>) {
        let (tx, rx) = mpsc::channel(64);
        (Tracer::to_channel(sampler, tx), rx)
    }

    #[test]
    fn a_request_continues_its_callers_trace_and_children_hang_below() {
        let (t, mut rx) = tracer(Sampler::default());
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        );
        h.insert("tracestate", HeaderValue::from_static("k=v"));
        let mut root = t.server_span("POST /v1/chat/completions", &h);
        let child = root.child("infergate.pick", SpanKind::Internal);
        let child_ctx = child.context().unwrap().clone();
        child.end();
        root.set("http.response.status_code", 200u16);
        root.set("http.response.status_code", 429u16);
        let root_ctx = root.context().unwrap().clone();
        drop(root);
        let c = rx.try_recv().unwrap();
        let r = rx.try_recv().unwrap();
        assert_eq!(
            r.context.trace_id.to_hex(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(r.parent.unwrap().to_hex(), "00f067aa0ba902b7");
        assert_eq!(r.context.trace_state.as_deref(), Some("k=v"));
        assert_eq!(r.kind, SpanKind::Server);
        assert_eq!(
            r.attributes,
            vec![("http.response.status_code", Value::Int(429))]
        );
        assert_eq!(c.parent, Some(root_ctx.span_id));
        assert_eq!(c.context, child_ctx);
        assert_eq!(c.context.trace_id, r.context.trace_id);
        assert_ne!(c.context.span_id, r.context.span_id);
        assert!(c.end >= c.start && r.end >= c.end);
    }

    #[test]
    fn an_unsampled_caller_or_a_disabled_tracer_records_nothing() {
        let (t, mut rx) = tracer(Sampler::default());
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            HeaderValue::from_static("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
        );
        let root = t.server_span("x", &h);
        assert!(!root.is_recording());
        assert!(!root.child("y", SpanKind::Internal).is_recording());
        drop(root);
        assert!(rx.try_recv().is_err());
        let off = Tracer::disabled();
        assert!(!off.server_span("x", &HeaderMap::new()).is_recording());
    }

    #[test]
    fn a_new_trace_gets_fresh_ids() {
        let (t, _rx) = tracer(Sampler::AlwaysOn);
        let a = t.server_span("a", &HeaderMap::new());
        let b = t.server_span("b", &HeaderMap::new());
        let (a, b) = (a.context().unwrap(), b.context().unwrap());
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.trace_id.0, [0; 16]);
    }
}
