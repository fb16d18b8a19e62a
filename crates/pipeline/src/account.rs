//! Accounting for one proxied response: the in-flight guard (and the flow-control permit) lives
//! exactly as long as the response body, the first chunk of a stream feeds the picker's latency
//! model and the TTFT histogram, and `usage` feeds the token counters and the trace capture.
//! A traced request's spans (the request's and the answering attempt's) end here too, with
//! the time to the first chunk and the usage. A successful answer's time to first token also
//! goes into its pool's recent requests (the member status document's P99 TTFT), here because
//! both fronts account through this one type. Whatever way the body ends — complete, failed,
//! or dropped by a client that went away — [`Accounting::finish`] runs once.

use std::sync::Arc;

use infergate_control::admission::FlowPermit;
use infergate_control::limits::LimitTicket;
use infergate_control::pool::PoolRuntime;
use infergate_picker::{Dispatch, InFlightGuard, TtftTicket};
use infergate_telemetry::capture::Pending;
use infergate_telemetry::metrics::{Metrics, ModelLabels, TokenLabels};
use infergate_telemetry::upstream::{ModelNameLabels, ObjectiveLabels, TtftLabels};
use infergate_telemetry::usage::UsageTap;
use infergate_trace::Span;
use tokio::time::Instant;

/// A response that started: what its accounting needs to know.
#[derive(Debug)]
pub struct Served<'a> {
    /// Where the response is counted.
    pub metrics: Arc<Metrics>,
    /// The pool whose latency model the first token teaches.
    pub pool: Arc<PoolRuntime>,
    /// The model the request was sent to.
    pub model: &'a str,
    /// The model the client asked for (differs from `model` after a rewrite).
    pub asked_model: &'a str,
    /// The upstream priority of the request's band.
    pub priority: i32,
    /// The request's tenant, when known.
    pub tenant: Option<&'a str>,
    /// When the request arrived.
    pub started: Instant,
    /// When it was sent to the endpoint that answers.
    pub dispatched: Instant,
    /// The dispatch to that endpoint: its in-flight guard and TTFT ticket.
    pub dispatch: Dispatch,
    /// The response is SSE, so its first chunk is the first token. A buffered answer's first
    /// byte is its last, which would teach the latency model nonsense, so only streams feed
    /// TTFT.
    pub streaming: bool,
    /// Reads `usage` out of the response as it passes.
    pub usage: UsageTap,
    /// The answer's HTTP status: only a successful (2xx) answer's first token counts in the
    /// pool's recent TTFT, so fast errors cannot make a failing pool look quick.
    pub status: u16,
}

/// One response's accounting.
#[derive(Debug)]
pub struct Accounting {
    metrics: Arc<Metrics>,
    pool: Arc<PoolRuntime>,
    model: ModelLabels,
    /// Upstream's labels of the request, folded once.
    objective: ObjectiveLabels,
    fairness_id: String,
    priority: String,
    started: Instant,
    dispatched: Instant,
    ticket: TtftTicket,
    guard: Option<InFlightGuard>,
    permit: Option<FlowPermit>,
    limit: Option<(LimitTicket, bool)>,
    streaming: bool,
    /// A 2xx answer: its first token counts in the pool's recent TTFT.
    succeeded: bool,
    first_seen: bool,
    /// The answer moved to another endpoint whose first chunk has not come yet.
    moved: bool,
    usage: UsageTap,
    capture: Option<Pending>,
    /// The request's span and the answering attempt's (empty when not traced).
    spans: Option<(Span, Span)>,
    finished: bool,
}

impl Accounting {
    /// Starts accounting for a response that started.
    pub fn new(served: Served<'_>) -> Self {
        let Served {
            metrics,
            pool,
            model,
            asked_model,
            priority,
            tenant,
            started,
            dispatched,
            dispatch,
            streaming,
            usage,
            status,
        } = served;
        let Dispatch { ticket, guard, .. } = dispatch;
        let model = metrics.models.fold(model);
        let objective = ObjectiveLabels {
            model_name: metrics.models.fold(asked_model),
            target_model_name: model.clone(),
        };
        metrics.in_flight.inc();
        metrics
            .upstream
            .running
            .get_or_create(&running(&objective))
            .inc();
        Self {
            fairness_id: metrics.tenants.fold(tenant.unwrap_or_default()),
            priority: priority.to_string(),
            objective,
            metrics,
            pool,
            model: ModelLabels { model },
            started,
            dispatched,
            ticket,
            guard: Some(guard),
            permit: None,
            limit: None,
            streaming,
            succeeded: (200..300).contains(&status),
            first_seen: false,
            moved: false,
            usage,
            capture: None,
            spans: None,
            finished: false,
        }
    }

    /// Holds the request's flow-control permit until the response ends, so that flow control
    /// counts the request in flight for exactly as long as the in-flight guard does.
    pub fn hold(&mut self, permit: FlowPermit) {
        self.permit = Some(permit);
    }

    /// Holds the request's rate-limit reservation until the response ends, to settle it with
    /// the response's `usage`; `failed`: the model server answered with an error status.
    pub fn hold_limit(&mut self, ticket: LimitTicket, failed: bool) {
        self.limit = Some((ticket, failed));
    }

    /// Writes the request to the trace capture when the response ends.
    pub fn capture(&mut self, pending: Pending) {
        self.capture = Some(pending);
    }

    /// Ends the request's span (`root`) and the answering attempt's (`upstream`) when the
    /// response ends, with what the response showed.
    pub fn trace(&mut self, root: Span, upstream: Span) {
        if root.is_recording() || upstream.is_recording() {
            self.spans = Some((root, upstream));
        }
    }

    /// The answer broke off before its end (the upstream failed, or the route timeout passed):
    /// the spans say so.
    pub fn broke(&mut self, why: &str) {
        if let Some((root, upstream)) = self.spans.as_mut() {
            root.set("error.type", "stream_interrupted");
            root.fail(format!("the answer broke off: {why}"));
            upstream.fail(why.to_owned());
        }
    }

    /// The answer goes on at another endpoint (its first failed mid-stream): the request is in
    /// flight there now, and no longer at the first. The request's TTFT was its first
    /// chunk's, so the continuation teaches the latency model nothing.
    pub fn moved(&mut self, dispatch: Dispatch) {
        self.guard = Some(dispatch.guard);
        self.moved = true;
    }

    /// A chunk passed through to the client.
    pub fn on_data(&mut self, chunk: &[u8]) {
        if self.moved && !chunk.is_empty() {
            self.moved = false;
            if let Some(guard) = self.guard.as_mut() {
                guard.first_token();
            }
        }
        if !self.first_seen && !chunk.is_empty() {
            self.first_seen = true;
            if let Some(guard) = self.guard.as_mut() {
                guard.first_token();
            }
            if self.streaming {
                self.pool
                    .observe_ttft(&self.ticket, self.dispatched.elapsed());
                let ttft = self.started.elapsed();
                self.metrics
                    .ttft
                    .get_or_create(&self.model)
                    .observe(ttft.as_secs_f64());
                self.observe_upstream_ttft(ttft.as_secs_f64());
                self.record_recent_ttft(ttft);
            }
            if let Some((_, upstream)) = self.spans.as_mut() {
                upstream.set(
                    "gen_ai.response.time_to_first_chunk",
                    self.dispatched.elapsed().as_secs_f64(),
                );
            }
        }
        self.usage.feed(chunk);
    }

    /// The body ended (or was dropped). Runs once.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.guard.take();
        self.permit.take();
        self.metrics.in_flight.dec();
        let m = &self.metrics;
        m.upstream
            .running
            .get_or_create(&running(&self.objective))
            .dec();
        let elapsed = self.started.elapsed();
        let took = elapsed.as_secs_f64();
        m.e2e.get_or_create(&self.model).observe(took);
        m.upstream
            .duration
            .get_or_create(&self.objective)
            .observe(took);
        if !self.streaming {
            // A buffered answer's first byte is its last: llm-d reports its whole duration.
            self.observe_upstream_ttft(took);
            self.record_recent_ttft(elapsed);
        }
        let usage = self.usage.finish();
        if let Some((root, mut upstream)) = self.spans.take() {
            if let Some(u) = &usage {
                upstream.set("gen_ai.usage.input_tokens", u.prompt_tokens);
                upstream.set("gen_ai.usage.output_tokens", u.completion_tokens);
                upstream.set("infergate.usage.cached_tokens", u.cached_tokens);
            }
            if self.streaming {
                upstream.set("infergate.stream_events", self.usage.streamed_events());
            }
            upstream.end();
            root.end();
        }
        if let Some(pending) = self.capture.take() {
            pending.complete(usage, self.usage.streamed_events());
        }
        if let Some((ticket, failed)) = self.limit.take() {
            ticket.finish(usage.map(|u| u.prompt_tokens + u.completion_tokens), failed);
        }
        if let Some(u) = usage {
            let m = &self.metrics;
            let tokens = TokenLabels {
                model: self.model.model.clone(),
                pool: self.pool.name.clone(),
            };
            m.prompt_tokens
                .get_or_create(&tokens)
                .inc_by(u.prompt_tokens);
            m.completion_tokens
                .get_or_create(&tokens)
                .inc_by(u.completion_tokens);
            m.cached_tokens
                .get_or_create(&tokens)
                .inc_by(u.cached_tokens);
            let up = &m.upstream;
            let o = &self.objective;
            up.input_tokens
                .get_or_create(o)
                .observe(u.prompt_tokens as f64);
            up.output_tokens
                .get_or_create(o)
                .observe(u.completion_tokens as f64);
            up.cached_tokens
                .get_or_create(o)
                .observe(u.cached_tokens as f64);
            if u.completion_tokens > 0 {
                up.ntpot
                    .get_or_create(o)
                    .observe(took / u.completion_tokens as f64);
            }
        }
    }

    /// The pool's recent TTFT, for a successful answer only.
    fn record_recent_ttft(&self, ttft: std::time::Duration) {
        if self.succeeded {
            self.pool.recent().record_ttft(ttft);
        }
    }

    fn observe_upstream_ttft(&self, seconds: f64) {
        self.metrics
            .upstream
            .ttft
            .get_or_create(&TtftLabels {
                model_name: self.objective.model_name.clone(),
                target_model_name: self.objective.target_model_name.clone(),
                fairness_id: self.fairness_id.clone(),
                priority: self.priority.clone(),
                streaming: self.streaming.to_string(),
            })
            .observe(seconds);
    }
}

/// `inference_objective_running_requests`'s labels for a request with `objective`.
fn running(objective: &ObjectiveLabels) -> ModelNameLabels {
    ModelNameLabels {
        model_name: objective.model_name.clone(),
    }
}

impl Drop for Accounting {
    fn drop(&mut self) {
        self.finish();
    }
}
