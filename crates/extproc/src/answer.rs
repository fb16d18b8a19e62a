//! The response's way back: the endpoint that served (Envoy reports it after its retries), the
//! in-flight guard moved there when it is not the primary, the gateway's accounting (TTFT,
//! usage, end-to-end latency, the flow-control permit, the rate-limit reservation settled with
//! the usage) fed with each chunk until the response ends, and, for a request a rewrite sent to
//! another model, the answer's `model` renamed back to the client's (JSON and SSE), as the
//! standalone gateway does.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::CONTENT_TYPE;
use infergate_control::PlaneHandle;
use infergate_picker::AttemptOutcome;
use infergate_pipeline::account::{Accounting, Served};
use infergate_pipeline::rewrite::restore::Restore;
use infergate_telemetry::usage::UsageTap;
use tokio::time::Instant;

use crate::destination::Routed;
use crate::protocol::Head;

/// One response's accounting. Dropping it ends the accounting (the in-flight guard goes), so a
/// stream that breaks off still releases its endpoint.
#[derive(Debug)]
pub struct Answer {
    accounting: Accounting,
    /// Renames the answer's `model` back to the client's, for a rewritten request.
    restore: Option<Restore>,
}

/// When the request started and when it was handed to Envoy.
#[derive(Debug, Clone, Copy)]
pub struct Times {
    /// Its headers reached infergate.
    pub started: Instant,
    /// The destination went back to Envoy: the dispatch, as far as infergate can see it.
    pub dispatched: Instant,
}

impl Answer {
    /// Starts accounting for the response to `routed` (its head is `head`), served by `served`
    /// (as Envoy reported it; the primary when it did not). Returns the address that served.
    ///
    /// When Envoy moved on to a fallback, the fallback is dispatched (it learns the prefix and
    /// is counted in flight) and the primary's guard is released. A served address outside the
    /// pool keeps the primary's dispatch: there is nothing else to credit.
    pub fn start(
        handle: &PlaneHandle,
        routed: Routed,
        served: Option<&str>,
        head: &Head,
        times: Times,
    ) -> (Self, String) {
        let content_type = head.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let Routed {
            target,
            snap,
            features,
            model,
            restore,
            limit,
            primary,
            dispatch,
            permit,
            ..
        } = routed;
        let pool = &target.pool;
        let primary_address = snap.pool.address(primary).unwrap_or_default().to_owned();
        let served_id = served
            .and_then(|a| snap.pool.position_of_address(a))
            .and_then(|pos| snap.pool.spec(pos))
            .map(|s| (s.id, s.address.clone()));
        // Outlier detection hears of the endpoint that answered (the primary when Envoy did not
        // say): a 5xx, Envoy's own for a connection it could not make included, is a failure.
        let answered = served_id.as_ref().map_or(primary, |(id, _)| *id);
        let (dispatch, endpoint) = match served_id {
            Some((id, address)) if id != primary => {
                match pool.dispatch(&snap, id, &features, handle.clock().now()) {
                    Ok(d) => {
                        pool.count_sent(id);
                        (d, address)
                    }
                    Err(_) => (dispatch, primary_address),
                }
            }
            _ => (dispatch, primary_address),
        };
        let outcome = if head.status.is_some_and(|s| s >= 500) {
            AttemptOutcome::Failed
        } else {
            AttemptOutcome::Answered
        };
        pool.record_outcome(answered, outcome, handle.clock().now());
        let sse =
            content_type.is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
        let mut accounting = Accounting::new(Served {
            metrics: Arc::clone(handle.metrics()),
            pool: Arc::clone(pool),
            model: &model,
            asked_model: restore.as_deref().unwrap_or(&model),
            priority: features.priority,
            tenant: features.tenant.as_deref(),
            started: times.started,
            dispatched: times.dispatched,
            dispatch,
            streaming: sse,
            usage: UsageTap::for_content_type(content_type),
            status: head.status.unwrap_or(0),
        });
        accounting.hold(permit);
        if let Some(ticket) = limit {
            // An error status without usage refunds the tokens, as in the standalone gateway.
            let failed = head.status.is_some_and(|s| (400..600).contains(&s));
            accounting.hold_limit(ticket, failed);
        }
        let restore = restore.and_then(|m| Restore::new(content_type, &m));
        (
            Self {
                accounting,
                restore,
            },
            endpoint,
        )
    }

    /// Ends the request's span and the upstream one with the response.
    pub fn trace(&mut self, root: infergate_trace::Span, upstream: infergate_trace::Span) {
        self.accounting.trace(root, upstream);
    }

    /// The response broke off before its end: the spans say so.
    pub fn broke(&mut self, why: &str) {
        self.accounting.broke(why);
    }

    /// Whether the answer's bytes change on the way (its `model` is renamed), so its
    /// `Content-Length` no longer holds.
    pub fn renames(&self) -> bool {
        self.restore.is_some()
    }

    /// A response chunk from the model server; returns the bytes to send on to the client
    /// (fewer while a `model` value is held back, more when it is renamed).
    pub fn on_data(&mut self, chunk: Vec<u8>) -> Vec<u8> {
        self.accounting.on_data(&chunk);
        let Some(restore) = self.restore.as_mut() else {
            return chunk;
        };
        let chunk = Bytes::from(chunk);
        let out = restore.feed(&chunk);
        // The last reference to an unchanged chunk hands its buffer back without a copy.
        drop(chunk);
        Vec::from(out)
    }

    /// The response ended. Runs once; later calls do nothing. Returns the bytes the renamer
    /// still held (a `model` value that never closed, given back unchanged).
    pub fn finish(&mut self) -> Vec<u8> {
        self.accounting.finish();
        self.restore
            .as_mut()
            .map(|r| Vec::from(r.finish()))
            .unwrap_or_default()
    }
}
