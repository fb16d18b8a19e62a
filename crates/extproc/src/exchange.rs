//! One ext_proc stream — one HTTP request and its response — as a state machine: each message
//! Envoy sends goes in, the messages to send back come out, in the protocol's order. No I/O and
//! no waiting of its own: the gRPC service feeds it, waits out the steps that cannot finish at
//! once for it ([`Exchange::take_pending`], see [`crate::wait`]) and watches its deadline.
//!
//! ```text
//! Headers ─request headers (token check starts)─▶ Body ─body … end_of_stream (or trailers)─┐
//!    │ (no body)                                    │ (over bbr.maxRequestBodyBytes: 413)   │
//!    └──────────────────────────────────────────────────────────────────────────────────────┤
//!   (token still being checked: Authenticating) ─▶ decide: parse → rewrite → route → limit →
//!   admit; refuse (immediate response) │ wait (Queued) ─┐ │ go now ─┐
//!                                      pick, answer headers + (rewritten) body ─▶ Upstream
//! Upstream ─response headers─▶ Response ─body (model renamed back) … end_of_stream─▶ Done
//! ```
//!
//! Invariants: the request-headers answer goes out only once the whole body is in and the
//! token is verified (the decision needs the model, the prompt and the identity), and it goes
//! out before any body chunk. A refused token is answered at once, body or not.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request as Message;
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use infergate_auth::Verified;
use infergate_control::routes::Routes;
use infergate_pipeline::trace::{self, RequestTrace};
use infergate_pipeline::ApiError;
use infergate_telemetry::metrics::RequestRecord;
use infergate_trace::Span;
use tokio::time::Instant;

use crate::answer::Answer;
use crate::destination::Routed;
use crate::metadata;
use crate::processor::Processor;
use crate::protocol::{self, Head};
use crate::wait::{Pending, Resumed};
use infergate_pipeline::Prepared;

mod decision;
mod respond;

/// Where the exchange is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the request headers.
    Headers,
    /// Buffering the request body.
    Body,
    /// The body is in; the token is still being checked.
    Authenticating,
    /// Waiting for the rate-limit store or in the pool's flow-control queue.
    Queued,
    /// The destination went back; waiting for the response headers.
    Upstream,
    /// Passing the response body through.
    Response,
    /// Answered or refused; nothing more to do.
    Done,
}

/// How the request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Its headers said there is no body.
    Headers,
    /// A body chunk with `end_of_stream`.
    Body,
    /// Trailers after the body.
    Trailers,
}

/// A protocol violation: Envoy sent a message the exchange cannot take in its phase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ext_proc message {message} arrived while {phase}")]
pub struct OutOfOrder {
    message: &'static str,
    phase: &'static str,
}

/// One request and its response.
pub struct Exchange {
    processor: Arc<Processor>,
    phase: Phase,
    started: Instant,
    /// One config for the whole exchange, even if a reload lands meanwhile.
    routes: Arc<Routes>,
    head: Head,
    body: Vec<u8>,
    subset: Option<Vec<String>>,
    /// The verified token, with auth on.
    token: Option<Verified>,
    /// The token check is still running.
    authenticating: bool,
    /// How the request ended, while the token check finishes.
    ended: Option<Ending>,
    /// A request waiting for its rate limits or for flow control.
    queued: Option<(Prepared, Ending)>,
    /// The step to wait on, until the service takes it.
    pending: Option<Pending>,
    routed: Option<Routed>,
    answer: Option<Answer>,
    dispatched: Instant,
    deadline: Option<Instant>,
    route_timeout: Option<Duration>,
    /// The pool's `streamIdleTimeout`: once the response has begun, the deadline is the last
    /// chunk plus this.
    stream_idle: Option<Duration>,
    record: RequestRecord,
    /// The request's spans (empty when not traced).
    trace: RequestTrace,
    /// The span of the step being waited on (the token check, the rate-limit store, the
    /// queue).
    step: Span,
    /// The span of the request's way to its endpoint through Envoy, from the pick to the
    /// response's end; its id is the `traceparent` the model server gets.
    upstream: Span,
}

impl std::fmt::Debug for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchange")
            .field("phase", &self.phase)
            .field("path", &self.head.path)
            .field("body_len", &self.body.len())
            .field("pending", &self.pending.is_some())
            .field("record", &self.record)
            .finish_non_exhaustive()
    }
}

fn message_name(m: Option<&Message>) -> &'static str {
    match m {
        Some(Message::RequestHeaders(_)) => "request_headers",
        Some(Message::RequestBody(_)) => "request_body",
        Some(Message::RequestTrailers(_)) => "request_trailers",
        Some(Message::ResponseHeaders(_)) => "response_headers",
        Some(Message::ResponseBody(_)) => "response_body",
        Some(Message::ResponseTrailers(_)) => "response_trailers",
        None => "without a request",
    }
}

impl Exchange {
    /// A new exchange, started now.
    pub fn new(processor: Arc<Processor>) -> Self {
        let now = Instant::now();
        let routes = processor.handle.routes();
        Self {
            processor,
            phase: Phase::Headers,
            started: now,
            routes,
            head: Head::default(),
            body: Vec::new(),
            subset: None,
            token: None,
            authenticating: false,
            ended: None,
            queued: None,
            pending: None,
            routed: None,
            answer: None,
            dispatched: now,
            deadline: None,
            route_timeout: None,
            stream_idle: None,
            record: RequestRecord::default(),
            trace: RequestTrace::default(),
            step: Span::default(),
            upstream: Span::default(),
        }
    }

    /// When the pool's `routeTimeout` runs out (counted from the request's arrival, so time
    /// queued is part of it), while the exchange waits on the queue or the upstream.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The step to wait on, when one could not finish at once (the token check, the
    /// rate-limit store, the flow-control queue). Dropping it abandons the step; its outcome
    /// goes to [`Exchange::on_resumed`].
    pub fn take_pending(&mut self) -> Option<Pending> {
        self.pending.take()
    }

    /// The outcome of a step that waited. Ignored once the exchange is done (a deadline or a
    /// refusal came first).
    pub fn on_resumed(&mut self, resumed: Resumed) -> Vec<ProcessingResponse> {
        if self.phase == Phase::Done {
            return Vec::new();
        }
        match resumed {
            Resumed::Authenticated(verdict) => {
                self.authenticating = false;
                match verdict {
                    Ok(token) => {
                        self.token = Some(token);
                        std::mem::take(&mut self.step).end();
                    }
                    Err(e) => return self.refuse(&e),
                }
                match self.ended.take() {
                    Some(ending) if self.phase == Phase::Authenticating => self.decide(ending),
                    _ => Vec::new(),
                }
            }
            Resumed::Limited(verdict) => {
                let Some((mut prepared, ending)) = self.queued.take() else {
                    return Vec::new();
                };
                match verdict {
                    Ok(ticket) => {
                        prepared.limit = ticket;
                        std::mem::take(&mut self.step).end();
                        self.admit(prepared, ending)
                    }
                    Err(e) => self.refuse(&e),
                }
            }
            Resumed::Admitted(verdict) => {
                let Some((prepared, ending)) = self.queued.take() else {
                    return Vec::new();
                };
                match verdict {
                    Ok(permit) => {
                        std::mem::take(&mut self.step).end();
                        self.route(prepared, permit, ending)
                    }
                    Err(e) => self.refuse(&e),
                }
            }
        }
    }

    /// Whether the exchange has nothing more to do.
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Takes one message from Envoy; returns what to send back, in order.
    pub fn on_message(
        &mut self,
        msg: ProcessingRequest,
    ) -> Result<Vec<ProcessingResponse>, OutOfOrder> {
        let md = msg.metadata_context.as_ref();
        if matches!(self.phase, Phase::Headers | Phase::Body) {
            // The hint may come with any message of the request; the latest one holds.
            if let Some(hint) = metadata::subset_hint(md) {
                self.subset = Some(hint);
            }
        }
        match (self.phase, msg.request) {
            (Phase::Headers, Some(Message::RequestHeaders(h))) => {
                self.head = protocol::read_head(h.headers.as_ref());
                let head = &self.head;
                let tracer = self.processor.handle.tracer();
                self.trace = RequestTrace::start(tracer, &head.method, &head.path, &head.headers);
                if let Some(refused) = self.authenticate() {
                    return Ok(refused);
                }
                if h.end_of_stream {
                    return Ok(self.body_done(Ending::Headers));
                }
                self.phase = Phase::Body;
                Ok(Vec::new())
            }
            (Phase::Body, Some(Message::RequestBody(b))) => {
                let limit = self.routes.config.bbr.max_request_body_bytes.value;
                if (self.body.len() + b.body.len()) as u64 > limit {
                    return Ok(self.refuse(&ApiError::too_large(limit)));
                }
                if self.body.is_empty() {
                    self.body = b.body;
                } else {
                    self.body.extend_from_slice(&b.body);
                }
                if b.end_of_stream {
                    return Ok(self.body_done(Ending::Body));
                }
                Ok(Vec::new())
            }
            (Phase::Body, Some(Message::RequestTrailers(_))) => {
                Ok(self.body_done(Ending::Trailers))
            }
            (Phase::Upstream, Some(Message::ResponseHeaders(h))) => {
                let head = protocol::read_head(h.headers.as_ref());
                Ok(self.respond(&head, md, h.end_of_stream))
            }
            (Phase::Response, Some(Message::ResponseBody(b))) => {
                Ok(self.response_body(b.body, b.end_of_stream))
            }
            (Phase::Response, Some(Message::ResponseTrailers(_))) => Ok(self.response_trailers()),
            // After an immediate response Envoy stops; anything still in flight is moot.
            (Phase::Done, _) => Ok(Vec::new()),
            (phase, other) => Err(OutOfOrder {
                message: message_name(other.as_ref()),
                phase: match phase {
                    Phase::Headers => "waiting for the request headers",
                    Phase::Body => "reading the request body",
                    Phase::Authenticating => "checking the token",
                    Phase::Queued => "waiting for rate limits or flow control",
                    Phase::Upstream => "waiting for the response headers",
                    Phase::Response => "passing the response body",
                    Phase::Done => "done",
                },
            }),
        }
    }

    /// A deadline passed. Before the response headers it is the pool's `routeTimeout`: the
    /// client gets a 504 as an OpenAI-shaped error. After them it is `streamIdleTimeout` (no
    /// chunk for that long): Envoy can only reset the stream, so the client sees a truncated
    /// response rather than a hang.
    pub fn on_deadline(&mut self) -> Vec<ProcessingResponse> {
        self.deadline = None;
        let err = ApiError::timeout(&self.record.pool, self.route_timeout.unwrap_or_default());
        match self.phase {
            Phase::Queued | Phase::Upstream => {
                self.queued = None;
                self.pending = None;
                self.routed = None;
                self.refuse(&err)
            }
            Phase::Response => {
                if let Some(answer) = self.answer.as_mut() {
                    answer.broke("no chunk for streamIdleTimeout");
                }
                // Envoy resets the stream: whatever the renamer still held is moot.
                let _held = self.finish();
                vec![protocol::refusal(&err)]
            }
            _ => Vec::new(),
        }
    }

    fn count(&mut self) {
        self.processor.handle.count_request(&self.record);
    }

    /// Refuses with `err` in the step `span` (which fails with it).
    fn refuse_in(&mut self, mut span: Span, err: &ApiError) -> Vec<ProcessingResponse> {
        trace::fail(&mut span, err);
        span.end();
        self.refuse(err)
    }

    fn refuse(&mut self, err: &ApiError) -> Vec<ProcessingResponse> {
        tracing::debug!(error = %err, "request refused");
        self.record.status = err.status().as_u16();
        self.count();
        trace::fail(&mut self.step, err);
        trace::fail(&mut self.upstream, err);
        std::mem::take(&mut self.step).end();
        std::mem::take(&mut self.upstream).end();
        std::mem::take(&mut self.trace).refused(err);
        self.phase = Phase::Done;
        self.body = Vec::new();
        self.queued = None;
        self.pending = None;
        vec![protocol::refusal(err)]
    }
}

#[cfg(test)]
mod tests;
