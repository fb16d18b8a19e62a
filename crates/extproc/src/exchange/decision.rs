//! The request's way to its answer: the token check (started with the headers), the decision
//! once the body is in, the tenant's rate limits, flow control, the pick, and the answer to the
//! request headers with the body (rewritten when a canary rule changed its model).

use std::sync::Arc;

use envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse;
use hyper::header::AUTHORIZATION;
use infergate_control::admission::{Admitted, FlowPermit};
use infergate_control::routes::rewrites::MODEL_NAME_REWRITE;
use infergate_pipeline::{admit, prepare, Inbound, Prepared};
use tokio::time::Instant;

use super::{Ending, Exchange, Phase};
use crate::destination;
use crate::protocol::{self, Direction};
use crate::wait::{self, Pending, Step};

impl Exchange {
    /// With auth on, starts checking the bearer token (every request through ext_proc is an
    /// inference request; Envoy keeps health and metrics routes away from it). A refusal is
    /// returned at once; a check that has to wait (a key reload) runs while the body arrives.
    pub(super) fn authenticate(&mut self) -> Option<Vec<ProcessingResponse>> {
        let auth = self.processor.handle.auth()?;
        let span = self.trace.step("infergate.auth");
        match wait::authenticate(auth, &self.head.headers) {
            Step::Done(Ok(token)) => self.token = Some(token),
            Step::Done(Err(e)) => return Some(self.refuse_in(span, &e)),
            Step::Wait(p) => {
                self.authenticating = true;
                self.pending = Some(p);
                self.step = span;
            }
        }
        // Nothing after this step reads the token (session ids, logs), and the model servers
        // never see it (the route answer removes it).
        self.head.headers.remove(AUTHORIZATION);
        None
    }

    /// The request is in: decide, once the token is verified.
    pub(super) fn body_done(&mut self, ending: Ending) -> Vec<ProcessingResponse> {
        if self.authenticating {
            self.ended = Some(ending);
            self.phase = Phase::Authenticating;
            return Vec::new();
        }
        self.decide(ending)
    }

    pub(super) fn decide(&mut self, ending: Ending) -> Vec<ProcessingResponse> {
        let routes = Arc::clone(&self.routes);
        if self.head.method == "GET" && self.head.path.split('?').next() == Some("/v1/models") {
            // The models the pools serve, as the standalone gateway lists them (and, as there,
            // not counted as an inference request).
            self.phase = Phase::Done;
            let headers = vec![protocol::set_header("content-type", b"application/json")];
            return vec![protocol::immediate(200, headers, routes.models(), "models")];
        }
        // A request whose body is empty has none: Envoy sent its headers with end of stream,
        // or an empty body, and either way it is routed by the model header.
        let inbound = Inbound {
            headers: &self.head.headers,
            body: (!self.body.is_empty()).then_some(self.body.as_slice()),
            path: &self.head.path,
            token: self.token.as_ref(),
        };
        let metrics = Arc::clone(self.processor.handle.metrics());
        let mut span = self.trace.step("infergate.route");
        let mut prepared = match prepare(&routes, inbound, &metrics, &mut self.record) {
            Ok(p) => p,
            Err(e) => return self.refuse_in(span, &e),
        };
        self.trace.prepared(&mut span, &prepared);
        if let Some(hint) = self.subset.as_deref() {
            span.set("infergate.subset_hint", hint.len());
            if let Err(e) =
                destination::restrict(&routes, &self.processor.subsets, &mut prepared, hint)
            {
                return self.refuse_in(span, &e);
            }
        }
        span.end();
        if let Some(rewritten) = prepared.body.take() {
            self.body = Vec::from(rewritten);
        }
        self.route_timeout = prepared.target.pool.route_timeout;
        self.stream_idle = prepared.target.pool.stream_idle_timeout;
        self.deadline = self.route_timeout.map(|t| self.started + t);
        // Limit: the tenant's requests and tokens, before the request may wait in flow control.
        let Some(limits) = self.processor.handle.rate_limits() else {
            return self.admit(prepared, ending);
        };
        let span = self.trace.step("infergate.rate_limit");
        match wait::limit(limits, prepared.charge.clone()) {
            Step::Done(Ok(ticket)) => {
                prepared.limit = ticket;
                span.end();
                self.admit(prepared, ending)
            }
            Step::Done(Err(e)) => self.refuse_in(span, &e),
            Step::Wait(p) => {
                self.step = span;
                self.wait(p, prepared, ending);
                Vec::new()
            }
        }
    }

    fn wait(&mut self, pending: Pending, prepared: Prepared, ending: Ending) {
        self.queued = Some((prepared, ending));
        self.pending = Some(pending);
        self.phase = Phase::Queued;
    }

    /// Flow control: go now, wait in the pool's queue, or be refused.
    pub(super) fn admit(&mut self, prepared: Prepared, ending: Ending) -> Vec<ProcessingResponse> {
        let mut span = self.trace.step("infergate.flow_control");
        match admit::admit(&prepared) {
            Ok(Admitted::Now(permit)) => {
                span.end();
                self.route(prepared, permit, ending)
            }
            Ok(Admitted::Queued(waiting)) => {
                span.set("infergate.flow.queued", true);
                self.step = span;
                self.wait(wait::queued(waiting), prepared, ending);
                Vec::new()
            }
            Err(e) => self.refuse_in(span, &e),
        }
    }

    /// Picks the endpoints of an admitted request and answers the headers, then the body.
    pub(super) fn route(
        &mut self,
        prepared: Prepared,
        permit: FlowPermit,
        ending: Ending,
    ) -> Vec<ProcessingResponse> {
        let handle = &self.processor.handle;
        let routed = match destination::pick(handle, prepared, permit, &self.trace) {
            Ok(r) => r,
            Err(e) => return self.refuse(&e),
        };
        let mut extra = Vec::new();
        // The model server continues the trace from the span of the request's way to it.
        let primary = routed.destination.split(',').next().unwrap_or_default();
        let upstream = self.trace.upstream(&routed.model, primary);
        if let Some(context) = upstream.context() {
            extra.extend(
                context
                    .propagation()
                    .map(|(name, value)| protocol::set_header(name, value.as_bytes())),
            );
        }
        self.upstream = upstream;
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
            // The length is the body sent on, which a rewrite may have changed.
            extra.push(protocol::content_length(self.body.len()));
        }
        // With auth on, the token stops here, as it does in the standalone gateway; so does a
        // client's rewrite choice, which is infergate's to act on, not the model server's.
        let mut remove = Vec::new();
        if self.processor.handle.auth().is_some() {
            remove.push(AUTHORIZATION.as_str().to_owned());
        }
        if self.head.headers.contains_key(MODEL_NAME_REWRITE) {
            remove.push(MODEL_NAME_REWRITE.as_str().to_owned());
        }
        let mut out = vec![protocol::route(
            &routed.destination,
            routed.why.as_ref(),
            extra,
            remove,
        )];
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
}
