//! Trace capture: one JSON line per completed request (arrival, model, adapter, tenant,
//! priority, token counts, prefix block hashes — never text), for `infergate bench --trace`.
//!
//! Writing stays off the request path. A request hands its record to a bounded channel with
//! `try_send` when its response ends; a writer thread of its own serialises and writes through
//! a buffered file, flushing whenever the channel runs dry. When the channel is full the record
//! is dropped and counted in `infergate_capture_dropped_total`: a slow disk costs records, never
//! latency. [`Capture::close`] (called once the gateway has drained) writes what is queued and
//! flushes, so a SIGTERM loses nothing that was captured.

mod record;
mod writer;

pub use record::{band_name, CaptureRecord, TokensFrom, FORMAT_VERSION};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use infergate_picker::RequestFeatures;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::usage::Usage;

/// A capture file that could not be opened.
///
/// The cause is part of the message and not a `source()`, so a chain printer shows it once.
#[derive(Debug, thiserror::Error)]
#[error("{context}: {cause}")]
pub struct CaptureError {
    /// What was being done.
    pub context: String,
    /// The I/O error.
    pub cause: std::io::Error,
}

/// Records waiting for the writer before new ones are dropped: at 8,000 requests/s a quarter
/// of a second of completions, and a few MiB at most.
pub const QUEUE_RECORDS: usize = 2_048;

/// What the writer thread is asked to do.
#[derive(Debug)]
enum Msg {
    Record(Box<CaptureRecord>),
    /// Write what is queued before this, flush, answer, stop.
    Close(oneshot::Sender<std::io::Result<()>>),
}

/// An open capture file. Cheap to clone; every clone feeds the same writer.
#[derive(Debug, Clone)]
pub struct Capture {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    tx: mpsc::Sender<Msg>,
    path: PathBuf,
    started: Instant,
    start_unix_ms: u64,
    written: Counter,
    dropped: Counter,
}

impl Capture {
    /// Creates (or truncates) `path` and starts its writer thread; records and drops are
    /// counted in `metrics`.
    pub fn open(path: &Path, metrics: &Metrics) -> Result<Capture, CaptureError> {
        let file = std::fs::File::create(path).map_err(|cause| CaptureError {
            context: format!("creating capture file {}", path.display()),
            cause,
        })?;
        let (tx, rx) = mpsc::channel(QUEUE_RECORDS);
        writer::spawn(
            file,
            rx,
            path,
            metrics.capture_records.clone(),
            metrics.capture_dropped.clone(),
        )
        .map_err(|cause| CaptureError {
            context: "starting the capture writer thread".into(),
            cause,
        })?;
        tracing::info!(file = %path.display(), "capturing completed requests");
        Ok(Capture::feeding(tx, path, metrics))
    }

    /// A capture whose records go to `tx`, starting now.
    fn feeding(tx: mpsc::Sender<Msg>, path: &Path, metrics: &Metrics) -> Capture {
        let start_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Capture {
            inner: Arc::new(Inner {
                tx,
                path: path.to_owned(),
                started: Instant::now(),
                start_unix_ms,
                written: metrics.capture_records.clone(),
                dropped: metrics.capture_dropped.clone(),
            }),
        }
    }

    /// What is known of a request when its response starts; completed by
    /// [`Pending::complete`] when the response ends.
    pub fn pending(&self, request: Request<'_>) -> Pending {
        let f = request.features;
        Pending {
            capture: self.clone(),
            arrived: request.arrived,
            record: Box::new(CaptureRecord {
                v: FORMAT_VERSION,
                start_unix_ms: self.inner.start_unix_ms,
                arrival_ms: 0.0,
                model: request.asked_model.to_owned(),
                routed_model: request.routed_model.to_owned(),
                adapter: f.target_adapter.clone(),
                endpoint: request.endpoint.to_owned(),
                tenant: f.tenant.clone(),
                priority: band_name(f.priority),
                status: request.status,
                input_tokens: f.prompt_tokens,
                output_tokens: 0,
                tokens_from: TokensFrom::Gateway,
                prefix_hashes: f.prompt_block_hashes.clone(),
                pick: request.pick.and_then(|p| serde_json::from_str(p).ok()),
            }),
        }
    }

    /// Writes what is queued, flushes and stops the writer; records completed after this are
    /// dropped (and counted). Call once the gateway has drained.
    pub async fn close(&self) {
        let (reply, flushed) = oneshot::channel();
        if self.inner.tx.send(Msg::Close(reply)).await.is_err() {
            return;
        }
        match flushed.await {
            Ok(Ok(())) => tracing::info!(
                file = %self.inner.path.display(),
                records = self.inner.written.get(),
                dropped = self.inner.dropped.get(),
                "capture flushed and closed"
            ),
            Ok(Err(e)) => {
                tracing::error!(file = %self.inner.path.display(), error = %e, "capture: the final flush failed")
            }
            Err(_) => {
                tracing::error!(file = %self.inner.path.display(), "capture: the writer stopped before the final flush")
            }
        }
    }
}

/// The parts of a request a capture record is made of, borrowed from where the response starts.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The picker's view of the request: adapter, tenant, priority, token estimate, hashes.
    pub features: &'a RequestFeatures,
    /// The model the client asked for.
    pub asked_model: &'a str,
    /// The model the request was sent as.
    pub routed_model: &'a str,
    /// The endpoint that answered.
    pub endpoint: &'a str,
    /// Its status.
    pub status: u16,
    /// When the request arrived at the gateway.
    pub arrived: Instant,
    /// The pick's explanation (JSON), when picks are explained (`--emit-endpoint-scores`).
    pub pick: Option<&'a str>,
}

/// A record waiting for its response to end.
#[derive(Debug)]
pub struct Pending {
    capture: Capture,
    arrived: Instant,
    record: Box<CaptureRecord>,
}

impl Pending {
    /// Fills in the token counts — `usage` when the answer had one, else the gateway's prompt
    /// estimate and its count of streamed token events — and queues the record without
    /// waiting: if the writer is behind, the record is dropped and counted.
    pub fn complete(self, usage: Option<Usage>, streamed_events: u64) {
        let Pending {
            capture,
            arrived,
            mut record,
        } = self;
        let inner = &capture.inner;
        record.arrival_ms =
            (arrived.saturating_duration_since(inner.started).as_micros() as f64) / 1e3;
        match usage {
            Some(u) => {
                record.input_tokens = u.prompt_tokens;
                record.output_tokens = u.completion_tokens;
                record.tokens_from = TokensFrom::Usage;
            }
            None => record.output_tokens = streamed_events,
        }
        if inner.tx.try_send(Msg::Record(record)).is_err() {
            inner.dropped.inc();
        }
    }
}

#[cfg(test)]
mod tests;
