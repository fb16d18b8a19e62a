//! A stream whose endpoint fails after the client began to receive it goes on at another
//! endpoint: the client's request is re-issued with the answer so far (vLLM's
//! `continue_final_message` for a chat, the extended prompt for a completion; the rules are
//! `infergate_pipeline::resume`'s), and the continuation's events are spliced into the client's
//! stream, which keeps its id and gets no token twice and none missing.
//!
//! [`Resume`] is what a resumable [`super::stream::ProxyBody`] carries besides its bytes; the
//! body drives it. At most [`MAX_RESUMES`] continuations per stream, each to an endpoint that
//! has not failed it yet.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::CONTENT_TYPE;
use hyper::{HeaderMap, Method, Response, StatusCode};
use infergate_control::pool::PoolRuntime;
use infergate_picker::metrics::Engine;
use infergate_picker::{AttemptOutcome, Dispatch, EndpointId, RequestFeatures};
use infergate_pipeline::resume::{Api, Continuation, EventFramer, Splice, Transcript};
use infergate_telemetry::metrics::ResumeLabels;

use super::keepalive::Lease;
use super::{build_request, send_upstream};
use crate::Front;

/// The most continuations one stream gets: a fault that follows the request from pod to pod
/// (a poisonous prompt) must not take the pool down with it.
pub const MAX_RESUMES: u32 = 3;

/// How long a continuation may take to send its answer's head when the pool sets no
/// first-byte timeout of its own.
const CONTINUATION_HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// What a continuation request is made of: the client's request as it went upstream.
#[derive(Debug)]
pub struct ResumeContext {
    /// The front: its clients and clock.
    pub front: Arc<Front>,
    /// The pool the request was routed to.
    pub pool: Arc<PoolRuntime>,
    /// The request as the picker saw it; the continuation's prompt begins with the same one.
    pub features: RequestFeatures,
    /// The request's method and path.
    pub method: Method,
    /// Its path and query.
    pub path: String,
    /// The headers it went upstream with.
    pub headers: HeaderMap,
    /// The body it went upstream with.
    pub body: Bytes,
}

impl ResumeContext {
    /// Whether a stream of this request, answered with `content_type`, can go on elsewhere:
    /// the pool resumes streams, the answer is an OpenAI stream, and a chat's engine knows
    /// `continue_final_message` (vLLM and SGLang do; TGI and TensorRT-LLM do not).
    pub fn resumable(pool: &PoolRuntime, path: &str, sse: bool) -> Option<Api> {
        if !pool.resume_streams || !sse {
            return None;
        }
        match Api::of_path(path)? {
            Api::Chat if !matches!(pool.engine, Engine::Vllm | Engine::Sglang) => None,
            api => Some(api),
        }
    }
}

/// A continuation that answered.
pub struct Resumed {
    /// Its answer, status 200.
    pub resp: Response<Incoming>,
    /// Its connection, to hand back when the answer ends.
    pub lease: Option<Lease>,
    /// Its dispatch: the in-flight guard now held for the request.
    pub dispatch: Dispatch,
    /// The endpoint that took it.
    pub endpoint: EndpointId,
    /// Its address.
    pub address: String,
}

type Pending = Pin<Box<dyn Future<Output = Result<Resumed, String>> + Send>>;

/// What a resumable stream needs to go on elsewhere.
pub struct Resume {
    ctx: Arc<ResumeContext>,
    /// Lets only whole events through to the client.
    pub framer: EventFramer,
    /// What the client has been sent.
    pub transcript: Transcript,
    /// The continuation's events made the client's, once the stream has been resumed.
    pub splice: Option<Splice>,
    /// The endpoint streaming now.
    pub endpoint: EndpointId,
    /// Its address.
    pub address: String,
    /// Endpoints that failed this stream.
    failed: Vec<EndpointId>,
    resumes: u32,
    /// The continuation on its way, while the stream is between endpoints.
    pub pending: Option<Pending>,
    /// Why the endpoint before it failed, for the error event if no continuation answers.
    pub lost: String,
}

impl fmt::Debug for Resume {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resume")
            .field("endpoint", &self.endpoint)
            .field("failed", &self.failed)
            .field("resumes", &self.resumes)
            .field("pending", &self.pending.is_some())
            .finish_non_exhaustive()
    }
}

/// What a failed endpoint's stream comes to.
pub enum NextStep {
    /// A continuation is on its way ([`Resume::pending`]).
    Continue,
    /// Every token was sent: these bytes end the stream.
    Finish(Bytes),
    /// It cannot go on: the stream ends with an error event saying why.
    Fail(String),
}

impl Resume {
    /// A resumable stream of `api`, answered by `endpoint` at `address`.
    pub fn new(ctx: ResumeContext, api: Api, endpoint: EndpointId, address: String) -> Self {
        Self {
            ctx: Arc::new(ctx),
            framer: EventFramer::default(),
            transcript: Transcript::new(api),
            splice: None,
            endpoint,
            address,
            failed: Vec::new(),
            resumes: 0,
            pending: None,
            lost: String::new(),
        }
    }

    /// Whether the client has seen the answer end.
    pub fn ended(&mut self) -> bool {
        self.transcript.ended()
    }

    /// The endpoint streaming now failed (`why`): counts it against the endpoint and decides
    /// how the stream goes on.
    pub fn failed(&mut self, why: &str) -> NextStep {
        let pool = &self.ctx.pool;
        let now = self.ctx.front.plane.clock().now();
        pool.record_outcome(self.endpoint, AttemptOutcome::Failed, now);
        self.failed.push(self.endpoint);
        // What a failed endpoint left of an unfinished event never reaches the client.
        self.framer.discard();
        let step = if self.resumes >= MAX_RESUMES {
            NextStep::Fail(format!(
                "{why}; not resumed: {MAX_RESUMES} continuations already"
            ))
        } else {
            match self.transcript.continuation(&self.ctx.body) {
                Err(e) => NextStep::Fail(format!("{why}; not resumed: {e}")),
                Ok(Continuation::Finish(end)) => NextStep::Finish(end),
                Ok(Continuation::Request { body, splice }) => {
                    self.resumes += 1;
                    self.splice = Some(splice);
                    why.clone_into(&mut self.lost);
                    self.pending = Some(Box::pin(continuation(
                        Arc::clone(&self.ctx),
                        body,
                        self.failed.clone(),
                    )));
                    NextStep::Continue
                }
            }
        };
        match &step {
            NextStep::Continue => {
                tracing::info!(pool = %pool.name, endpoint = %self.address, %why, "stream lost its endpoint; going on at another");
            }
            NextStep::Finish(_) => self.count("finished"),
            NextStep::Fail(reason) => {
                tracing::warn!(pool = %pool.name, endpoint = %self.address, %reason, "stream not resumed");
                self.count("failed");
            }
        }
        step
    }

    /// Counts what became of the stream the endpoint streaming now lost
    /// (`infergate_stream_resumes_total`): `resumed`, `finished` or `failed`.
    pub fn count(&self, outcome: &str) {
        self.ctx
            .front
            .plane
            .metrics()
            .stream_resumes
            .get_or_create(&ResumeLabels {
                pool: self.ctx.pool.name.clone(),
                endpoint: self.address.clone(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// A continuation answered: it streams from now on.
    pub fn moved(&mut self, endpoint: EndpointId, address: String) {
        self.endpoint = endpoint;
        self.address = address;
    }
}

/// Sends the continuation `body` to the best endpoint that has not failed the stream, then the
/// next, until one answers 200 with a stream; every one that fails is counted against it.
async fn continuation(
    ctx: Arc<ResumeContext>,
    body: Bytes,
    failed: Vec<EndpointId>,
) -> Result<Resumed, String> {
    let pool = &ctx.pool;
    let plane = &ctx.front.plane;
    let snap = pool.snapshot();
    let candidates = pool
        .candidates(&snap, &ctx.features, plane.clock().now())
        .map_err(|e| format!("no endpoint to go on at: {e}"))?;
    let mut last = "every endpoint the picker offered had failed this stream".to_owned();
    for id in candidates.into_iter().filter(|id| !failed.contains(id)) {
        let Some(address) = snap.pool.address(id) else {
            continue;
        };
        let now = plane.clock().now();
        let Ok(dispatch) = pool.dispatch(&snap, id, &ctx.features, now) else {
            continue;
        };
        pool.count_sent(id);
        let req = build_request(
            &ctx.method,
            ctx.headers.clone(),
            address,
            &ctx.path,
            body.clone(),
            pool.h2c,
        )
        .map_err(|e| format!("{address}: {e}"))?;
        let limit = pool
            .first_byte_timeout
            .for_attempt(dispatch.predicted_ttft, true)
            .unwrap_or(CONTINUATION_HEAD_TIMEOUT);
        let answer = tokio::time::timeout(limit, send_upstream(&ctx.front, pool.h2c, req, address));
        let outcome = match answer.await {
            Ok(Ok((resp, lease))) => {
                let sse = resp
                    .headers()
                    .get(CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|c| c.to_ascii_lowercase().starts_with("text/event-stream"));
                if resp.status() == StatusCode::OK && sse {
                    pool.record_outcome(id, AttemptOutcome::Answered, plane.clock().now());
                    return Ok(Resumed {
                        resp,
                        lease,
                        dispatch,
                        endpoint: id,
                        address: address.to_owned(),
                    });
                }
                last = format!("{address} answered the continuation {}", resp.status());
                resp.status().is_server_error()
            }
            Ok(Err(failure)) => {
                last = failure.to_string();
                failure.endpoint_failed()
            }
            Err(_) => {
                last = format!("{address} sent no answer within {limit:?}");
                true
            }
        };
        if outcome {
            pool.record_outcome(id, AttemptOutcome::Failed, plane.clock().now());
        }
    }
    Err(last)
}
