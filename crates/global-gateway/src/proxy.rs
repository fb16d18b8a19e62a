//! One request through the tier: the body read (at most [`MAX_BODY_BYTES`]), its model
//! parsed, the members ranked, and the best one tried; a failure before the member's answer
//! began (unreachable, refused, reset, or its 502/503) moves the request to the next-best, up
//! to `routing.maxAttempts`. Once a member's answer began, the request stays with it: a stream
//! that breaks ends with an error event (the inference may have run; retrying could run it
//! twice). A member's 429 is passed on and marks it saturated for its `Retry-After`; it is not
//! retried elsewhere ("no capacity" sprayed over every member would make the overload global).
//! A 504 is not retried either, for the same reason as a broken stream.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST,
    RETRY_AFTER, TE, TRAILER, TRANSFER_ENCODING, UPGRADE,
};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};
use infergate_api_error::ApiError;
use infergate_control::limits::LimitTicket;
use infergate_global_picker::{
    rank, room_to_eject, Availability, Ranked, Refusal, Request as Choice,
};
use infergate_picker::AttemptOutcome;
use infergate_telemetry::usage::UsageTap;

use crate::tier::Tier;

/// The largest request body the tier reads (AWS's global tier takes 10 MiB).
pub const MAX_BODY_BYTES: usize = 10 << 20;

/// The header naming the member that answered.
pub const MEMBER_HEADER: &str = "x-infergate-member";

/// Why a body ended in error (the connection is then closed short, so the client knows).
pub(crate) type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// What the tier answers with: a member's streamed body or its own.
pub(crate) type ProxyBody = BoxBody<Bytes, BodyError>;

fn own(e: ApiError) -> Response<ProxyBody> {
    e.into_response()
        .map(|b| Full::new(b).map_err(|never| match never {}).boxed())
}

/// The tier's own answer: `body` with `status` and `content_type`.
pub(crate) fn own_body(
    status: StatusCode,
    body: impl Into<Bytes>,
    content_type: &'static str,
) -> Response<ProxyBody> {
    let mut r = Response::new(
        Full::new(body.into())
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub(crate) fn json_response(status: StatusCode, value: &serde_json::Value) -> Response<ProxyBody> {
    own_body(status, value.to_string(), "application/json")
}

/// Answers one data-plane request.
pub(crate) async fn handle(tier: Arc<Tier>, req: Request<Incoming>) -> Response<ProxyBody> {
    let started = Instant::now();
    let resp = route(&tier, req, started).await;
    tier.metrics
        .answered(resp.status().as_u16(), started.elapsed());
    resp
}

async fn route(tier: &Arc<Tier>, req: Request<Incoming>, arrived: Instant) -> Response<ProxyBody> {
    if req.method() == Method::GET && req.uri().path() == "/v1/models" {
        return models(tier);
    }
    let (parts, body) = req.into_parts();
    // Auth first, before the body is read, as the cluster tier does. The caller's
    // `Authorization` is kept: the member verifies it again and takes the tenant from it.
    let token = match &tier.auth {
        None => None,
        Some(auth) => match auth.verify(&parts.headers).await {
            Ok(verified) => Some(verified),
            Err(e) => return own(e),
        },
    };
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return own(ApiError::too_large(MAX_BODY_BYTES as u64));
        }
        Err(e) => return own(ApiError::body_read(e)),
    };
    let parsed = match infergate_pipeline::parse::parse_request(&parts.headers, Some(&body)) {
        Ok(p) => p,
        Err(e) => return own(e),
    };
    // The tenant's limits, shared with every replica of the tier through the store.
    let identity = infergate_pipeline::identity::identity(
        &tier.config.tenancy,
        token.as_ref(),
        &parts.headers,
    );
    let prompt_tokens = (parsed.prompt.get(&body).len() as u64)
        .div_ceil(infergate_pipeline::features::BYTES_PER_TOKEN);
    let charge = infergate_pipeline::limit::Charge {
        tenant: identity.tenant,
        prompt_tokens,
        max_tokens: if infergate_pipeline::parse::is_embeddings(parts.uri.path()) {
            Some(0)
        } else {
            parsed.max_tokens
        },
    };
    let mut ticket = match infergate_pipeline::limit::limit(tier.limits.clone(), charge).await {
        Ok(t) => t,
        Err(e) => return own(e),
    };
    let caller_region = parts
        .headers
        .get(tier.config.region_header.value.as_str())
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let max_attempts = tier.config.routing.max_attempts.value as usize;
    let mut tried: Vec<usize> = Vec::with_capacity(max_attempts);
    let mut last_failure = String::new();
    while tried.len() < max_attempts {
        // Ranked again for each attempt: a member may have gone stale or been ejected while the
        // last attempt waited, and those already tried are not tried twice.
        let next = {
            let now = tier.now();
            let mut guard = tier.table();
            let table = &mut *guard;
            let choice = Choice {
                model: &parsed.model,
                caller_region: caller_region.as_deref(),
            };
            match rank(&table.members, choice, now, &tier.settings, &mut table.rng) {
                Ok(ranked) => {
                    for r in &ranked {
                        table.last_score[r.member] = Some(r.score);
                    }
                    ranked.into_iter().find(|r| !tried.contains(&r.member))
                }
                Err(refusal) if tried.is_empty() => {
                    drop(guard);
                    return own(match refusal {
                        Refusal::UnknownModel => ApiError::no_member_serves(&parsed.model),
                        Refusal::NoneAvailable => ApiError::no_member_available(&parsed.model),
                        Refusal::AllSaturated { retry_after } => ApiError::members_saturated(
                            &parsed.model,
                            retry_after.as_secs_f64().ceil().max(1.0) as u64,
                        ),
                    });
                }
                // After a failed attempt every other member is saturated: the request has not
                // started, so it is refused as saturated (429, retry later), not failed.
                Err(Refusal::AllSaturated { retry_after }) => {
                    drop(guard);
                    return own(ApiError::members_saturated(
                        &parsed.model,
                        retry_after.as_secs_f64().ceil().max(1.0) as u64,
                    ));
                }
                // Every member left is out now: what the tried ones said is the answer.
                Err(_) => None,
            }
        };
        let Some(r) = next else {
            break;
        };
        if let Some(&previous) = tried.last() {
            tier.metrics.failover(previous);
        }
        tried.push(r.member);
        match attempt(tier, &r, &parts, &body, &mut ticket, arrived).await {
            Attempt::Answered(resp) => return resp,
            Attempt::Failed(why) => last_failure = why,
        }
    }
    let tried = tried.len();
    own(ApiError::members_failed(tried, last_failure))
}

/// How often an attempt waiting on a member, or a stream from it, checks that the member is
/// still a candidate: a black-holed member shows nothing else, and its status goes stale within
/// a few pulls.
const LOST_CHECK: Duration = Duration::from_millis(100);

/// Resolves once member `index` is no longer a candidate (stale or ejected).
async fn lost(tier: &Tier, index: usize) {
    loop {
        tokio::time::sleep(LOST_CHECK).await;
        if !still_candidate(tier, index) {
            return;
        }
    }
}

fn still_candidate(tier: &Tier, index: usize) -> bool {
    let now = tier.now();
    tier.table()
        .members
        .get(index)
        .is_some_and(|m| m.state.availability(now) == Availability::Available)
}

/// What waiting for a member's answer came to.
enum Waited<R> {
    /// The request ended (answered, failed, or timed out).
    Ended(R),
    /// The member left the candidates first.
    MemberLost,
}

/// How one attempt ended.
enum Attempt {
    /// An answer to pass on (the member's, or the tier's 504).
    Answered(Response<ProxyBody>),
    /// It failed before answering; the next member may be tried.
    Failed(String),
}

/// Hop-by-hop headers, never forwarded (RFC 9110 §7.6.1).
fn hop_by_hop(name: &HeaderName) -> bool {
    name == CONNECTION
        || name == TE
        || name == TRAILER
        || name == TRANSFER_ENCODING
        || name == UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
        || name.as_str() == "proxy-authorization"
}

fn member_request(
    tier: &Tier,
    index: usize,
    parts: &hyper::http::request::Parts,
    body: &Bytes,
) -> Result<Request<Full<Bytes>>, String> {
    let address = &tier.addresses[index];
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut req = Request::builder()
        .method(parts.method.clone())
        .uri(format!("http://{}{path}", address.data))
        .body(Full::new(body.clone()))
        .map_err(|e| format!("building the request: {e}"))?;
    let headers: &mut HeaderMap = req.headers_mut();
    for (name, value) in &parts.headers {
        if hop_by_hop(name) || name == HOST || name == CONTENT_LENGTH {
            continue;
        }
        if name == AUTHORIZATION && address.authorization.is_some() {
            continue;
        }
        headers.append(name.clone(), value.clone());
    }
    if let Some(auth) = &address.authorization {
        if let Ok(v) = HeaderValue::from_str(auth) {
            headers.insert(AUTHORIZATION, v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&address.data) {
        headers.insert(HOST, v);
    }
    Ok(req)
}

fn record(tier: &Tier, index: usize, outcome: AttemptOutcome) {
    let now = tier.now();
    let mut table = tier.table();
    let room = room_to_eject(&table.members, now);
    let policy = tier.settings.outlier;
    if let Some(m) = table.members.get_mut(index) {
        if let Some(length) = m.state.on_attempt(outcome, now, &policy, || room) {
            tracing::warn!(member = %m.name, ?length, "member ejected after consecutive failures");
            tier.metrics.ejected(index);
        }
    }
}

/// The `Retry-After` of a 429, in seconds (a date, or none, reads as 1 s).
fn retry_after(headers: &HeaderMap) -> Duration {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(1), Duration::from_secs)
}

async fn attempt(
    tier: &Arc<Tier>,
    r: &Ranked,
    parts: &hyper::http::request::Parts,
    body: &Bytes,
    ticket: &mut Option<LimitTicket>,
    arrived: Instant,
) -> Attempt {
    let index = r.member;
    let name = tier.config.members[index].name.as_str();
    let req = match member_request(tier, index, parts, body) {
        Ok(req) => req,
        Err(e) => return Attempt::Failed(e),
    };
    let flight = Flight::start(tier, index);
    tier.metrics.sent(index);
    let first_byte = tier.config.routing.first_byte_timeout.value;
    let started = Instant::now();
    let waited = tokio::select! {
        r = tokio::time::timeout(first_byte, tier.addresses[index].data_client.request(req)) => Waited::Ended(r),
        () = lost(tier, index) => Waited::MemberLost,
    };
    let resp = match waited {
        Waited::MemberLost => {
            // Nothing reached the client yet: to it the request has not started, so it goes to
            // the next member (the lost one may have run it; its answer can no longer come).
            return Attempt::Failed(format!(
                "{name}: left the candidates (stale or ejected) before answering"
            ));
        }
        Waited::Ended(Err(_)) => {
            record(tier, index, AttemptOutcome::Failed);
            return Attempt::Answered(own(ApiError::member_timeout(name, first_byte)));
        }
        Waited::Ended(Ok(Err(e))) => {
            record(tier, index, AttemptOutcome::Failed);
            return Attempt::Failed(format!("{name}: {e}"));
        }
        Waited::Ended(Ok(Ok(resp))) => resp,
    };
    tier.metrics.first_byte(index, started.elapsed());
    let status = resp.status();
    if status == StatusCode::BAD_GATEWAY || status == StatusCode::SERVICE_UNAVAILABLE {
        record(tier, index, AttemptOutcome::Failed);
        return Attempt::Failed(format!("{name}: answered {status}"));
    }
    if status == StatusCode::TOO_MANY_REQUESTS {
        let wait = retry_after(resp.headers());
        let now = tier.now();
        let mut table = tier.table();
        if let Some(m) = table.members.get_mut(index) {
            m.state.on_throttled(now, wait);
        }
    }
    record(
        tier,
        index,
        if status.is_server_error() {
            AttemptOutcome::Failed
        } else {
            AttemptOutcome::Answered
        },
    );
    let sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let (mut head, incoming) = resp.into_parts();
    for name in [CONNECTION, TRANSFER_ENCODING, TE, TRAILER, UPGRADE] {
        head.headers.remove(name);
    }
    if sse {
        // The error event a broken stream ends with would overrun a declared length.
        head.headers.remove(CONTENT_LENGTH);
    }
    if let Ok(v) = HeaderValue::from_str(name) {
        head.headers.insert(MEMBER_HEADER, v);
    }
    let content_type = head
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let guarded = Guarded {
        inner: incoming,
        sse,
        ended: false,
        usage: UsageTap::for_content_type(content_type.as_deref()),
        ticket: ticket.take(),
        failed: status.as_u16() >= 400,
        // Only a successful answer's first chunk is a first token.
        arrived: status.is_success().then_some(arrived),
        tier: Arc::clone(tier),
        member: index,
        check: Box::pin(tokio::time::sleep(LOST_CHECK)),
        _flight: flight,
    };
    Attempt::Answered(Response::from_parts(head, guarded.boxed()))
}

/// A request in flight at a member, from its sending until its answer's body is done or
/// dropped (or the attempt failed): while it lives, the member's status is credited with it.
struct Flight {
    tier: Arc<Tier>,
    member: usize,
    generation: u64,
}

impl Flight {
    fn start(tier: &Arc<Tier>, member: usize) -> Self {
        let generation = tier
            .table()
            .members
            .get_mut(member)
            .map_or(0, |m| m.state.on_sent());
        Self {
            tier: Arc::clone(tier),
            member,
            generation,
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        if let Some(m) = self.tier.table().members.get_mut(self.member) {
            m.state.on_done(self.generation);
        }
    }
}

/// A member's body passed through; a stream that breaks after it began ends with an error
/// event (SSE) rather than silently, and counts as the member's failure.
struct Guarded {
    inner: Incoming,
    sse: bool,
    ended: bool,
    tier: Arc<Tier>,
    member: usize,
    /// When to check next that the member is still a candidate.
    check: Pin<Box<tokio::time::Sleep>>,
    /// Reads the answer's `usage` on its way through, for the tenant's token limit.
    usage: UsageTap,
    /// The tenant's reservation, settled when the body ends (or is dropped).
    ticket: Option<LimitTicket>,
    /// The member answered with an error status: its tokens are refunded.
    failed: bool,
    /// When the request arrived, until its first chunk is counted (then `None`).
    arrived: Option<Instant>,
    _flight: Flight,
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // Ended or abandoned by the client: the usage read so far (the whole of it when the
        // body ended), else the estimate stands for a success and is refunded for an error.
        if let Some(ticket) = self.ticket.take() {
            let used = self
                .usage
                .finish()
                .map(|u| u.prompt_tokens + u.completion_tokens);
            ticket.finish(used, self.failed);
        }
    }
}

impl Guarded {
    /// Ends the body after a failure `why`: an error event for a stream, else an error.
    fn fail(&mut self, why: String) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.ended = true;
        let member = self.tier.config.members[self.member].name.clone();
        tracing::warn!(%member, %why, "member's answer broke after it began");
        // Without SSE there is no way to say it inside the body: ending it short (the
        // connection closed) tells the client the answer is incomplete.
        let event = serde_json::json!({"error": {
            "message": format!("global tier: member `{member}` {why}"),
            "type": "internal_stream_failure",
            "param": null,
            "code": "member_stream_broken",
        }});
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(format!(
            "data: {event}\n\n"
        ))))))
    }
}

impl Body for Guarded {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Err(e))) => {
                record(&self.tier, self.member, AttemptOutcome::Failed);
                if self.sse {
                    return self.fail(format!("broke the stream: {e}"));
                }
                self.ended = true;
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Pending => {
                // A black-holed member sends nothing and closes nothing: the stream would wait
                // forever. Its status going stale is the sign.
                while self.check.as_mut().poll(cx).is_ready() {
                    if !still_candidate(&self.tier, self.member) {
                        if self.sse {
                            return self.fail("was lost mid-stream (stale or ejected)".into());
                        }
                        self.ended = true;
                        return Poll::Ready(Some(Err(
                            "the member was lost mid-answer (stale or ejected)".into(),
                        )));
                    }
                    let next = tokio::time::Instant::now() + LOST_CHECK;
                    self.check.as_mut().reset(next);
                }
                Poll::Pending
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.usage.feed(data);
                    if let Some(arrived) = self.arrived.take() {
                        self.tier
                            .metrics
                            .first_token(self.member, arrived.elapsed());
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.sse {
            // The error event may add bytes the member's length does not count.
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

/// `GET /v1/models`: every model and adapter some available member serves.
fn models(tier: &Tier) -> Response<ProxyBody> {
    let now = tier.now();
    let table = tier.table();
    let mut names = std::collections::BTreeSet::new();
    for m in &table.members {
        if m.state.availability(now) != Availability::Available {
            continue;
        }
        for pool in m.state.status().map(|s| s.pools.as_slice()).unwrap_or(&[]) {
            names.extend(pool.models.iter().cloned());
            names.extend(pool.adapters.iter().cloned());
        }
    }
    let data: Vec<serde_json::Value> = names
        .into_iter()
        .map(|id| serde_json::json!({"id": id, "object": "model", "owned_by": "infergate"}))
        .collect();
    json_response(
        StatusCode::OK,
        &serde_json::json!({"object": "list", "data": data}),
    )
}
