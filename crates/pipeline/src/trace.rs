//! The spans of one inference request, the same from both fronts: a SERVER span for the whole
//! request (continuing the client's `traceparent`), a span per pipeline step that took time or
//! decided something (`infergate.auth`, `infergate.route`, `infergate.rate_limit`,
//! `infergate.flow_control`, `infergate.pick`), and a CLIENT span per upstream attempt, whose id
//! goes to the model server as its `traceparent`. Attribute names follow OpenTelemetry's HTTP
//! and GenAI conventions where one exists; infergate's own are `infergate.*`.
//!
//! Never a prompt or a completion: only names, counts, times and the pick's explanation
//! (addresses and scores).

use hyper::HeaderMap;
use infergate_api_error::ApiError;
use infergate_control::pool::PoolRuntime;
use infergate_control::Clock;
use infergate_picker::RequestFeatures;
use infergate_trace::{Span, SpanKind, Tracer};

use crate::pick::{self, Picked, Why};
use crate::Prepared;

/// One request's spans. With tracing off or the trace unsampled, every method is a no-op.
#[derive(Debug, Default)]
pub struct RequestTrace {
    root: Span,
    operation: &'static str,
}

/// GenAI's operation name for an inference route.
fn operation(path: &str) -> &'static str {
    match path {
        "/v1/chat/completions" => "chat",
        "/v1/completions" => "text_completion",
        "/v1/embeddings" => "embeddings",
        _ => "unknown",
    }
}

impl RequestTrace {
    /// The request's span, started now: `{method} {path}`, continuing `headers`' trace.
    pub fn start(tracer: &Tracer, method: &str, path: &str, headers: &HeaderMap) -> Self {
        let path = path.split('?').next().unwrap_or(path);
        // Named once sampled: an untraced request allocates nothing here.
        let mut root = tracer.server_span(String::new(), headers);
        let operation = operation(path);
        if root.is_recording() {
            root.rename(format!("{method} {path}"));
            root.set("http.request.method", method);
            root.set("url.path", path);
            root.set("gen_ai.operation.name", operation);
        }
        Self { root, operation }
    }

    /// Whether the request is traced (so an explanation is worth computing for it).
    pub fn is_recording(&self) -> bool {
        self.root.is_recording()
    }

    /// A pipeline step's span, started now.
    pub fn step(&self, name: &'static str) -> Span {
        self.root.child(name, SpanKind::Internal)
    }

    /// What routing found: the model asked for and the one routed to, the pool, the band.
    pub fn prepared(&mut self, route: &mut Span, p: &Prepared) {
        if !self.root.is_recording() {
            return;
        }
        let asked = p.restore.as_deref().unwrap_or(&p.model);
        for span in [&mut self.root, route] {
            span.set("gen_ai.request.model", asked);
            span.set("infergate.model", p.model.as_str());
            span.set("infergate.pool", p.target.pool.name.as_str());
            span.set("infergate.band", p.band.to_string());
        }
        route.set("gen_ai.request.stream", p.stream);
        route.set("infergate.prompt_tokens", p.features.prompt_tokens);
        route.set("infergate.context_tokens", p.features.context_tokens);
        if let Some(adapter) = &p.target.adapter {
            route.set("infergate.adapter", adapter.as_str());
        }
        if let Some(tenant) = &p.features.tenant {
            self.root.set("infergate.tenant", tenant.as_str());
        }
    }

    /// Pick (step 9) in its span: explained whenever the request is traced, so the span can
    /// say why; the explanation is returned for the client or Envoy only with `emit`
    /// (`--emit-endpoint-scores`).
    pub fn pick(
        &self,
        pool: &PoolRuntime,
        features: &RequestFeatures,
        clock: Clock,
        emit: bool,
    ) -> Result<(Picked, Option<Why>), ApiError> {
        let mut span = self.step("infergate.pick");
        let picked = pick::pick(pool, features, clock, emit || span.is_recording())
            .inspect_err(|e| fail(&mut span, e))?;
        let why = picked.why();
        Self::picked(&mut span, &picked, why.as_ref());
        Ok((picked, why.filter(|_| emit)))
    }

    /// What the pick chose (`span` is its step), with its explanation when there is one.
    fn picked(span: &mut Span, picked: &Picked, why: Option<&Why>) {
        if !span.is_recording() {
            return;
        }
        let address = picked
            .snap
            .pool
            .address(picked.pick.primary)
            .unwrap_or_default();
        span.set("infergate.endpoint", address);
        span.set("infergate.fallbacks", picked.pick.fallbacks.len());
        span.set(
            "infergate.pick.decision_seconds",
            picked.decision.as_secs_f64(),
        );
        if let Some(e) = picked.pick.explanation.as_deref() {
            span.set("infergate.pick.candidates", e.scored.len());
            span.set("infergate.pick.removed", e.removed.len());
        }
        if let Some(why) = why {
            span.set("infergate.pick.explanation", why.explanation.as_str());
        }
    }

    /// The span of one attempt at `address` (`host:port`) for `model`, started now; its
    /// context is the `traceparent` the model server gets.
    pub fn upstream(&self, model: &str, address: &str) -> Span {
        let mut span = self.root.child(String::new(), SpanKind::Client);
        if span.is_recording() {
            span.rename(format!("{} {model}", self.operation));
            span.set("gen_ai.operation.name", self.operation);
            span.set("gen_ai.request.model", model);
            served_by(&mut span, address);
        }
        span
    }

    /// The request was refused with `e` (before any answer): the span ends with it.
    pub fn refused(mut self, e: &ApiError) {
        let root = &mut self.root;
        if !root.is_recording() {
            return;
        }
        root.set("http.response.status_code", e.status().as_u16());
        root.set("error.type", e.code());
        if let Some(reason) = e.dropped_reason() {
            root.set("infergate.dropped_reason", reason);
        }
        root.fail(refusal_message(e));
    }

    /// The request was answered with `status`: the span, to end with the response body.
    pub fn answered(mut self, status: u16) -> Span {
        if !self.root.is_recording() {
            return self.root;
        }
        self.root.set("http.response.status_code", status);
        if status >= 500 {
            self.root.set("error.type", status.to_string());
            self.root
                .fail(format!("the model server answered {status}"));
        }
        self.root
    }
}

/// Names the endpoint (`host:port`) an attempt's span went to.
pub fn served_by(span: &mut Span, address: &str) {
    let (host, port) = address.rsplit_once(':').unwrap_or((address, ""));
    span.set("server.address", host);
    if let Ok(port) = port.parse::<u16>() {
        span.set("server.port", port);
    }
}

/// Marks the step `span` failed with `e`.
pub fn fail(span: &mut Span, e: &ApiError) {
    if span.is_recording() {
        span.fail(refusal_message(e));
    }
}

/// Why a request was refused, for its span: the error's message, except for a client error,
/// whose message may quote the request body (a JSON parser's complaint).
fn refusal_message(e: &ApiError) -> String {
    if e.status().as_u16() == 400 {
        e.code().to_owned()
    } else {
        e.message().to_owned()
    }
}
