//! One ext_proc stream — one HTTP request and its response — as a state machine: each message
//! Envoy sends goes in, the messages to send back come out, in the protocol's order. No I/O and
//! no waiting of its own: the gRPC service feeds it, waits out a flow-control queue for it
//! ([`Exchange::take_waiting`]) and watches its deadline.
//!
//! ```text
//! Headers ─request headers─▶ Body ─body … end_of_stream (or trailers)─▶ decide
//!    │ (no body)               │ (over bbr.maxRequestBodyBytes: 413)       │
//!    └────────────────────────────────────────────────────────────────────┤
//! decide: refuse (immediate response) │ queue ─admitted─┐ │ admit now ─┐
//!                                                      pick, answer headers + body ─▶ Upstream
//! Upstream ─response headers─▶ Response ─body … end_of_stream (or trailers)─▶ Done
//! ```
//!
//! Invariant: the request-headers answer goes out only once the whole body is in (the decision
//! needs the model and the prompt), and it goes out before any body chunk.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request as Message;
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use hyper::header::CONTENT_TYPE;
use infergate_gateway::api_error::ApiError;
use infergate_gateway::metrics::RequestLabels;
use infergate_gateway::route::Routes;
use tokio::time::Instant;

use crate::answer::{Answer, Times};
use crate::decide::{self, Ask, Prepared, Routed};
use crate::metadata;
use crate::protocol::{self, Direction, Head};
use crate::service::Processor;
use infergate_gateway::admission::{Admitted, FlowPermit, Waiting};

/// Where the exchange is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the request headers.
    Headers,
    /// Buffering the request body.
    Body,
    /// Waiting in the pool's flow-control queue.
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
#[derive(Debug)]
pub struct Exchange {
    processor: Arc<Processor>,
    phase: Phase,
    started: Instant,
    /// One config for the whole exchange, even if a reload lands meanwhile.
    routes: Arc<Routes>,
    head: Head,
    body: Vec<u8>,
    subset: Option<Vec<String>>,
    queued: Option<(Prepared, Ending)>,
    waiting: Option<Waiting>,
    routed: Option<Routed>,
    answer: Option<Answer>,
    dispatched: Instant,
    deadline: Option<Instant>,
    route_timeout: Option<Duration>,
    labels: RequestLabels,
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
            queued: None,
            waiting: None,
            routed: None,
            answer: None,
            dispatched: now,
            deadline: None,
            route_timeout: None,
            labels: RequestLabels {
                model: String::new(),
                pool: String::new(),
                endpoint: String::new(),
                status: 0,
            },
        }
    }

    /// When the pool's `routeTimeout` runs out (counted from the request's arrival, so time
    /// queued is part of it), while the exchange waits on the queue or the upstream.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The flow-control queue entry to wait on, when the request was queued. Dropping it
    /// leaves the queue; its verdict goes to [`Exchange::on_admitted`].
    pub fn take_waiting(&mut self) -> Option<Waiting> {
        self.waiting.take()
    }

    /// Flow control's verdict on a queued request: picked and sent on, or refused.
    pub fn on_admitted(
        &mut self,
        verdict: Result<FlowPermit, ApiError>,
    ) -> Vec<ProcessingResponse> {
        let Some((prepared, ending)) = self.queued.take() else {
            return Vec::new();
        };
        match verdict {
            Ok(permit) => self.route(prepared, permit, ending),
            Err(e) => self.refuse(&e),
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
                if h.end_of_stream {
                    return Ok(self.decide(Ending::Headers));
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
                    return Ok(self.decide(Ending::Body));
                }
                Ok(Vec::new())
            }
            (Phase::Body, Some(Message::RequestTrailers(_))) => Ok(self.decide(Ending::Trailers)),
            (Phase::Upstream, Some(Message::ResponseHeaders(h))) => {
                let head = protocol::read_head(h.headers.as_ref());
                Ok(self.respond(&head, md, h.end_of_stream))
            }
            (Phase::Response, Some(Message::ResponseBody(b))) => {
                if let Some(a) = self.answer.as_mut() {
                    a.on_data(&b.body);
                }
                if b.end_of_stream {
                    self.finish();
                }
                Ok(protocol::pass_through(
                    Direction::Response,
                    b.body,
                    b.end_of_stream,
                ))
            }
            (Phase::Response, Some(Message::ResponseTrailers(_))) => {
                self.finish();
                Ok(vec![protocol::trailers(Direction::Response)])
            }
            // After an immediate response Envoy stops; anything still in flight is moot.
            (Phase::Done, _) => Ok(Vec::new()),
            (phase, other) => Err(OutOfOrder {
                message: message_name(other.as_ref()),
                phase: match phase {
                    Phase::Headers => "waiting for the request headers",
                    Phase::Body => "reading the request body",
                    Phase::Queued => "queued by flow control",
                    Phase::Upstream => "waiting for the response headers",
                    Phase::Response => "passing the response body",
                    Phase::Done => "done",
                },
            }),
        }
    }

    /// The pool's `routeTimeout` ran out before the response ended: a 504. Before the response
    /// headers the client gets it as an OpenAI-shaped error; after them Envoy can only reset
    /// the stream, so the client sees a truncated response rather than a hang.
    pub fn on_deadline(&mut self) -> Vec<ProcessingResponse> {
        self.deadline = None;
        let err = ApiError::timeout(&self.labels.pool, self.route_timeout.unwrap_or_default());
        match self.phase {
            Phase::Queued | Phase::Upstream => {
                self.queued = None;
                self.waiting = None;
                self.routed = None;
                self.refuse(&err)
            }
            Phase::Response => {
                self.finish();
                vec![protocol::refusal(&err)]
            }
            _ => Vec::new(),
        }
    }

    fn count(&mut self) {
        self.processor
            .handle
            .metrics()
            .requests
            .get_or_create(&self.labels)
            .inc();
    }

    fn refuse(&mut self, err: &ApiError) -> Vec<ProcessingResponse> {
        tracing::debug!(error = %err, "request refused");
        self.labels.status = err.status().as_u16();
        self.count();
        self.phase = Phase::Done;
        self.body = Vec::new();
        vec![protocol::refusal(err)]
    }

    fn decide(&mut self, ending: Ending) -> Vec<ProcessingResponse> {
        let routes = Arc::clone(&self.routes);
        if self.head.method == "GET" && self.head.path.split('?').next() == Some("/v1/models") {
            // The models the pools serve, as the standalone gateway lists them (and, as there,
            // not counted as an inference request).
            self.phase = Phase::Done;
            let headers = vec![protocol::set_header("content-type", b"application/json")];
            return vec![protocol::immediate(200, headers, routes.models(), "models")];
        }
        let ask = Ask {
            headers: &self.head.headers,
            body: &self.body,
            subset: self.subset.as_deref(),
        };
        let prepared =
            match decide::prepare(&routes, &self.processor.subsets, ask, &mut self.labels) {
                Ok(p) => p,
                Err(e) => return self.refuse(&e),
            };
        let pool = Arc::clone(&prepared.target.pool);
        self.route_timeout = pool.route_timeout;
        self.deadline = self.route_timeout.map(|t| self.started + t);
        match pool.admission().enqueue(prepared.flow_ask()) {
            Ok(Admitted::Now(permit)) => self.route(prepared, permit, ending),
            Ok(Admitted::Queued(waiting)) => {
                self.queued = Some((prepared, ending));
                self.waiting = Some(waiting);
                self.phase = Phase::Queued;
                Vec::new()
            }
            Err(e) => self.refuse(&e),
        }
    }

    /// Picks the endpoints of an admitted request and answers the headers, then the body.
    fn route(
        &mut self,
        prepared: Prepared,
        permit: FlowPermit,
        ending: Ending,
    ) -> Vec<ProcessingResponse> {
        let routed = match decide::pick(&self.processor.handle, prepared, permit) {
            Ok(r) => r,
            Err(e) => return self.refuse(&e),
        };
        let mut extra = Vec::new();
        if self.routes.config.bbr.enabled {
            // Body-based routing: Envoy's routes match these to send the request to its pool's
            // cluster (the route cache is cleared with the same answer).
            extra.push(protocol::set_header(
                protocol::MODEL_NAME,
                routed.model.as_bytes(),
            ));
            extra.push(protocol::set_header(
                protocol::BASE_MODEL_NAME,
                routed.target.base_model.as_bytes(),
            ));
        }
        if ending == Ending::Body {
            // Trailers need a chunked body, so a request with trailers keeps Envoy's framing.
            extra.push(protocol::content_length(self.body.len()));
        }
        let mut out = vec![protocol::route(&routed.destination, extra)];
        match ending {
            Ending::Headers => {}
            Ending::Body => out.extend(protocol::body_chunks(Direction::Request, &self.body, true)),
            Ending::Trailers => {
                out.extend(protocol::body_chunks(Direction::Request, &self.body, false));
                out.push(protocol::trailers(Direction::Request));
            }
        }
        self.body = Vec::new();
        self.dispatched = Instant::now();
        self.routed = Some(routed);
        self.phase = Phase::Upstream;
        out
    }

    fn respond(
        &mut self,
        head: &Head,
        md: Option<&envoy_types::pb::envoy::config::core::v3::Metadata>,
        end_of_stream: bool,
    ) -> Vec<ProcessingResponse> {
        let Some(routed) = self.routed.take() else {
            self.phase = Phase::Done;
            return vec![protocol::response_headers(Vec::new())];
        };
        let served = metadata::served(md);
        let content_type = head.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let times = Times {
            started: self.started,
            dispatched: self.dispatched,
        };
        let (answer, endpoint) = Answer::start(
            &self.processor.handle,
            routed,
            served.as_deref(),
            content_type,
            times,
        );
        self.labels.status = head.status.unwrap_or(0);
        self.labels.endpoint.clone_from(&endpoint);
        self.count();
        self.answer = Some(answer);
        self.phase = Phase::Response;
        if end_of_stream {
            self.finish();
        }
        // The client sees where it was served, as with the standalone gateway.
        vec![protocol::response_headers(vec![protocol::set_header(
            protocol::DESTINATION,
            endpoint.as_bytes(),
        )])]
    }

    fn finish(&mut self) {
        if let Some(mut a) = self.answer.take() {
            a.finish();
        }
        self.deadline = None;
        self.phase = Phase::Done;
    }
}

#[cfg(test)]
mod tests;
