//! The exporter: finished spans queue (bounded), and one task sends them to the collector in
//! batches, as OpenTelemetry's batch span processor does: a batch goes when it is full
//! (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`), when its oldest span has waited `OTEL_BSP_SCHEDULE_DELAY`,
//! or on a flush.
//!
//! Nothing here waits on a request's path: a span that finds the queue full is dropped and
//! counted (`reason="queue_full"`), and a batch the collector does not take is dropped and
//! counted (`reason="export_failed"`), not retried, so a slow collector costs spans, never
//! latency or memory.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::otlp::{self, Origin};
use crate::record::SpanRecord;
use crate::settings::{Protocol, TraceSettings};

/// What the exporter counts (`infergate_trace_spans_*`).
#[derive(Debug, Clone, Default)]
pub struct TraceCounters {
    /// Spans the collector took.
    pub exported: Counter,
    /// Spans dropped because the queue was full.
    pub dropped_queue_full: Counter,
    /// Spans dropped because their batch was not taken.
    pub dropped_export_failed: Counter,
}

/// What the exporter task is sent: a finished span, or a flush to answer.
#[derive(Debug)]
pub(crate) enum Item {
    Span(SpanRecord),
    Flush(oneshot::Sender<()>),
}

/// Where a finished span goes.
#[derive(Debug)]
pub(crate) enum Queue {
    /// To the exporter task.
    Export {
        sender: mpsc::Sender<Item>,
        counters: TraceCounters,
        /// How long a flush may take: one export request's timeout, per batch in the queue.
        flush_timeout: Duration,
    },
    /// Straight to a test's channel.
    Channel(mpsc::Sender<SpanRecord>),
}

impl Queue {
    pub(crate) fn channel(sender: mpsc::Sender<SpanRecord>) -> Self {
        Queue::Channel(sender)
    }

    /// Queues a finished span, or drops and counts it when the queue is full.
    pub(crate) fn push(&self, span: SpanRecord) {
        match self {
            Queue::Export {
                sender, counters, ..
            } => {
                if sender.try_send(Item::Span(span)).is_err() {
                    counters.dropped_queue_full.inc();
                }
            }
            Queue::Channel(sender) => {
                let _ = sender.try_send(span);
            }
        }
    }

    /// Exports everything queued before this call; returns when the collector answered for
    /// it, or when the flush timeout passed.
    pub(crate) async fn flush(&self) {
        let Queue::Export {
            sender,
            flush_timeout,
            ..
        } = self
        else {
            return;
        };
        let (done, answered) = oneshot::channel();
        let flushed = async {
            if sender.send(Item::Flush(done)).await.is_ok() {
                let _ = answered.await;
            }
        };
        if tokio::time::timeout(*flush_timeout, flushed).await.is_err() {
            tracing::warn!("trace flush timed out: spans still queued are lost");
        }
    }
}

/// Starts the exporter task; returns the queue finished spans go into.
pub(crate) fn start(settings: TraceSettings, counters: TraceCounters) -> Queue {
    let (sender, receiver) = mpsc::channel(settings.max_queue);
    let batches = settings.max_queue.div_ceil(settings.max_batch.max(1)) as u32;
    let flush_timeout = settings.timeout * batches.max(1) + Duration::from_secs(1);
    let exporter = Exporter::new(settings, counters.clone());
    tokio::spawn(exporter.run(receiver));
    Queue::Export {
        sender,
        counters,
        flush_timeout,
    }
}

struct Exporter {
    client: Client<HttpConnector, Full<Bytes>>,
    settings: TraceSettings,
    origin: Arc<Origin>,
    counters: TraceCounters,
    /// When a failure was last logged, so a collector that is down is reported, not shouted.
    warned: Option<Instant>,
}

/// How often a failing collector is logged.
const WARN_EVERY: Duration = Duration::from_secs(30);

impl Exporter {
    fn new(settings: TraceSettings, counters: TraceCounters) -> Self {
        let mut builder = Client::builder(TokioExecutor::new());
        if settings.protocol == Protocol::Grpc {
            builder.http2_only(true);
        }
        let origin = Arc::new(Origin {
            resource: settings
                .resource
                .iter()
                .map(|(k, v)| otlp::string(k, v))
                .collect(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        });
        Self {
            client: builder.build_http(),
            settings,
            origin,
            counters,
            warned: None,
        }
    }

    async fn run(mut self, mut receiver: mpsc::Receiver<Item>) {
        let mut batch: Vec<SpanRecord> = Vec::new();
        let mut due: Option<Instant> = None;
        loop {
            let item = match due {
                Some(at) => tokio::select! {
                    item = receiver.recv() => item,
                    () = tokio::time::sleep_until(at) => {
                        self.send(std::mem::take(&mut batch)).await;
                        due = None;
                        continue;
                    }
                },
                None => receiver.recv().await,
            };
            match item {
                None => {
                    self.send(batch).await;
                    return;
                }
                Some(Item::Span(span)) => {
                    batch.push(span);
                    if batch.len() >= self.settings.max_batch {
                        self.send(std::mem::take(&mut batch)).await;
                        due = None;
                    } else if due.is_none() {
                        due = Some(Instant::now() + self.settings.delay);
                    }
                }
                Some(Item::Flush(done)) => {
                    self.send(std::mem::take(&mut batch)).await;
                    due = None;
                    let _ = done.send(());
                }
            }
        }
    }

    async fn send(&mut self, mut spans: Vec<SpanRecord>) {
        let max = self.settings.max_batch.max(1);
        while !spans.is_empty() {
            let rest = spans.split_off(spans.len().min(max));
            let batch = std::mem::replace(&mut spans, rest);
            let n = batch.len() as u64;
            // Encoding a batch takes a while; off the runtime's threads, requests never wait
            // behind it (on a one-CPU gateway the kernel interleaves the two).
            let origin = Arc::clone(&self.origin);
            let body = tokio::task::spawn_blocking(move || otlp::encode(&origin, batch)).await;
            let sent = match body {
                Ok(body) => tokio::time::timeout(self.settings.timeout, self.export(body))
                    .await
                    .unwrap_or_else(|_| Err("timed out".to_owned())),
                Err(e) => Err(format!("encoding the batch failed: {e}")),
            };
            match sent {
                Ok(()) => {
                    self.counters.exported.inc_by(n);
                }
                Err(why) => {
                    self.counters.dropped_export_failed.inc_by(n);
                    if self.warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                        self.warned = Some(Instant::now());
                        tracing::warn!(endpoint = %self.settings.endpoint, error = %why, spans = n, "trace export failed: spans dropped");
                    }
                }
            }
        }
    }

    /// One export request; `Err` says why the collector did not take it.
    async fn export(&self, message: Vec<u8>) -> Result<(), String> {
        let grpc = self.settings.protocol == Protocol::Grpc;
        let body = if grpc {
            // A gRPC message: uncompressed flag, big-endian length, the bytes.
            let mut framed = Vec::with_capacity(message.len() + 5);
            framed.push(0);
            framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
            framed.extend_from_slice(&message);
            framed
        } else {
            message
        };
        let mut req = Request::new(Full::new(Bytes::from(body)));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.settings.endpoint.clone();
        let headers = req.headers_mut();
        for (k, v) in &self.settings.headers {
            headers.insert(k.clone(), v.clone());
        }
        if grpc {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            headers.insert("te", HeaderValue::from_static("trailers"));
        } else {
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-protobuf"),
            );
        }
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let status = resp.status();
        let head_grpc_status = resp.headers().get("grpc-status").cloned();
        let collected = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?;
        if !status.is_success() {
            return Err(format!("the collector answered {status}"));
        }
        if grpc {
            let code = head_grpc_status.or_else(|| {
                collected
                    .trailers()
                    .and_then(|t| t.get("grpc-status").cloned())
            });
            match code.as_ref().map(HeaderValue::as_bytes) {
                Some(b"0") => {}
                Some(c) => return Err(format!("grpc-status {}", String::from_utf8_lossy(c))),
                None => return Err("no grpc-status in the answer".to_owned()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{SpanContext, SpanId, TraceId};
    use crate::record::SpanKind;
    use std::time::SystemTime;

    fn record() -> SpanRecord {
        SpanRecord {
            context: SpanContext {
                trace_id: TraceId([1; 16]),
                span_id: SpanId([2; 8]),
                sampled: true,
                trace_state: None,
            },
            parent: None,
            name: "x".to_owned(),
            kind: SpanKind::Internal,
            start: SystemTime::now(),
            end: SystemTime::now(),
            attributes: Vec::new(),
            error: None,
        }
    }

    fn settings(endpoint: &str, max_queue: &str) -> TraceSettings {
        let max_queue = max_queue.to_owned();
        TraceSettings::from_lookup(Some(endpoint), |k| match k {
            "OTEL_BSP_MAX_QUEUE_SIZE" => Some(max_queue.clone()),
            "OTEL_EXPORTER_OTLP_TIMEOUT" => Some("2000".to_owned()),
            _ => None,
        })
        .unwrap()
        .unwrap()
    }

    fn dead_endpoint() -> String {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_full_queue_drops_and_counts_and_a_refused_batch_too() {
        let counters = TraceCounters::default();
        let queue = start(settings(&dead_endpoint(), "2"), counters.clone());
        // The exporter task has not run yet (one thread, no await): two fit, three do not.
        for _ in 0..5 {
            queue.push(record());
        }
        assert_eq!(counters.dropped_queue_full.get(), 3);
        queue.flush().await;
        assert_eq!(counters.dropped_export_failed.get(), 2);
        assert_eq!(counters.exported.get(), 0);
    }
}
