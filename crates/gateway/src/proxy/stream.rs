//! The upstream response body on its way to the client: each frame is passed on the moment it
//! arrives (no buffering, SSE intact), while accounting watches it go by.
//!
//! Once streaming has begun the status line is gone, so an upstream failure (reset, crash, an
//! end before the answer's) or a silence past `streamIdleTimeout` cannot become an error
//! status. A resumable stream ([`super::resume`]) then goes on at another endpoint, the client
//! none the wiser; one that cannot be resumed ends with one error event,
//! `data: {"error": {...}}`, which OpenAI clients raise as an error; any other body is aborted,
//! so the client sees a truncated response rather than a hang.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Sleep;

use crate::proxy::keepalive::Lease;
use crate::proxy::resume::{NextStep, Resume, Resumed};
use infergate_control::error_chain;
use infergate_pipeline::account::Accounting;
use infergate_pipeline::BoxError;

/// What polling a body for its next frame gives.
type FramePoll = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// Why a stream was cut short.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StreamError(String);

/// A streamed upstream response body.
#[derive(Debug)]
pub struct ProxyBody {
    inner: Incoming,
    /// The first frame, when the proxy read it before answering; passed on first.
    first: Option<Frame<Bytes>>,
    /// The pool's `streamIdleTimeout`.
    idle_after: Option<Duration>,
    /// Its timer: made when the first byte goes (the wait for that is the route and
    /// first-byte timeouts' business) and re-armed by every frame after.
    idle: Option<Pin<Box<Sleep>>>,
    sse: bool,
    done: bool,
    endpoint: String,
    account: Accounting,
    /// The upstream connection, handed back for the next request once the body has ended.
    lease: Option<Lease>,
    /// How the stream goes on elsewhere if its endpoint fails; `None` when it cannot.
    resume: Option<Box<Resume>>,
    /// Bytes that go before anything else: the end the gateway wrote for a stream that sent
    /// every token, or an unfinished event at the upstream's own end.
    queued: Option<Bytes>,
}

impl ProxyBody {
    /// Wraps `inner`, whose `first` frame was already read (if it was); `idle` is the pool's
    /// `streamIdleTimeout`.
    pub fn new(
        inner: Incoming,
        first: Option<Frame<Bytes>>,
        idle: Option<Duration>,
        sse: bool,
        endpoint: String,
        account: Accounting,
    ) -> Self {
        Self {
            inner,
            first,
            idle_after: idle,
            idle: None,
            sse,
            done: false,
            endpoint,
            account,
            lease: None,
            resume: None,
            queued: None,
        }
    }

    /// Lets the stream go on elsewhere when its endpoint fails ([`Resume`]).
    pub fn resuming(mut self, resume: Resume) -> Self {
        self.resume = Some(Box::new(resume));
        self
    }

    /// Hands `lease`'s connection back as soon as the upstream body has ended (at once if it
    /// has no body), with no task of its own; a body that fails or is dropped before its end
    /// drops the lease, and the connection closes.
    pub fn returning(mut self, lease: Lease) -> Self {
        if self.inner.is_end_stream() {
            // The first frame, if it is still to go, is already read: the connection is free.
            lease.release();
        } else {
            self.lease = Some(lease);
        }
        self
    }

    fn release(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.release();
        }
    }

    /// Accounts for a frame on its way to the client and re-arms the idle timer. A resumable
    /// stream lets through only whole events (a continuation's made the client's); `None` when
    /// the frame completed none.
    fn passed(&mut self, frame: Frame<Bytes>) -> Option<Frame<Bytes>> {
        if let Some(data) = frame.data_ref() {
            self.rearm(data.is_empty());
        }
        let frame = match (self.resume.as_mut(), frame.into_data()) {
            (Some(resume), Ok(data)) => {
                let whole = resume.framer.push(data);
                let whole = match &resume.splice {
                    Some(splice) if !whole.is_empty() => splice.rewrite(&whole),
                    _ => whole,
                };
                if whole.is_empty() {
                    return None;
                }
                resume.transcript.record(&whole);
                Frame::data(whole)
            }
            (_, Ok(data)) => Frame::data(data),
            (_, Err(frame)) => frame,
        };
        if let Some(data) = frame.data_ref() {
            self.account.on_data(data);
        }
        Some(frame)
    }

    /// Re-arms the idle timer for a chunk that came (unless it was empty).
    fn rearm(&mut self, empty: bool) {
        if let (false, Some(after)) = (empty, self.idle_after) {
            let at = tokio::time::Instant::now() + after;
            match self.idle.as_mut() {
                Some(sleep) => sleep.as_mut().reset(at),
                None => self.idle = Some(Box::pin(tokio::time::sleep_until(at))),
            }
        }
    }

    /// The endpoint streaming now failed: the stream goes on elsewhere if it can, else ends
    /// with the error. `None`: a continuation is on its way (poll again).
    fn endpoint_failed(&mut self, reason: String) -> Option<FramePoll> {
        // The connection is mid-answer: it cannot carry another request, so it closes now.
        self.lease = None;
        let Some(resume) = self.resume.as_mut() else {
            return Some(self.fail(reason));
        };
        match resume.failed(&reason) {
            NextStep::Continue => None,
            NextStep::Finish(end) => {
                self.done = true;
                self.account.on_data(&end);
                self.account.finish();
                Some(Poll::Ready(Some(Ok(Frame::data(end)))))
            }
            NextStep::Fail(why) => Some(self.fail(why)),
        }
    }

    /// A continuation answered: its body is the stream from now on.
    fn resumed(&mut self, resumed: Resumed) {
        let Resumed {
            resp,
            lease,
            dispatch,
            endpoint,
            address,
        } = resumed;
        self.inner = resp.into_body();
        self.lease = lease;
        self.account.moved(dispatch);
        self.endpoint.clone_from(&address);
        if let Some(resume) = self.resume.as_mut() {
            resume.moved(endpoint, address);
        }
        // The wait for the continuation's first chunk is a fresh one.
        self.idle = None;
        if self.inner.is_end_stream() {
            if let Some(lease) = self.lease.take() {
                lease.release();
            }
        }
    }

    fn fail(&mut self, reason: String) -> FramePoll {
        tracing::warn!(endpoint = %self.endpoint, %reason, "upstream stream ended early");
        self.done = true;
        self.lease = None;
        self.account.broke(&reason);
        self.account.finish();
        if self.sse {
            Poll::Ready(Some(Ok(Frame::data(error_event(&reason)))))
        } else {
            Poll::Ready(Some(Err(Box::new(StreamError(reason)))))
        }
    }

    /// The upstream body ended. A resumable stream that ended before its answer did lost its
    /// endpoint like any other failure; an unfinished event it held goes out as it is.
    fn ended(&mut self) -> Option<FramePoll> {
        if let Some(resume) = self.resume.as_mut() {
            if !resume.ended() {
                return self.endpoint_failed("the stream ended before the answer did".to_owned());
            }
            let held = resume.framer.take_held();
            if !held.is_empty() {
                self.queued = Some(held);
            }
        }
        self.release();
        if let Some(held) = self.queued.take() {
            self.done = true;
            self.account.on_data(&held);
            self.account.finish();
            return Some(Poll::Ready(Some(Ok(Frame::data(held)))));
        }
        self.done = true;
        self.account.finish();
        Some(Poll::Ready(None))
    }
}

/// The SSE event that ends a broken stream.
pub fn error_event(reason: &str) -> Bytes {
    let v = serde_json::json!({"error": {
        "message": format!("the upstream stream ended early: {reason}"),
        "type": "upstream_error",
        "param": null,
        "code": "stream_interrupted",
    }});
    Bytes::from(format!("data: {v}\n\n"))
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            if let Some(pending) = this.resume.as_mut().and_then(|r| r.pending.as_mut()) {
                let result = match pending.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(result) => result,
                };
                let lost = match this.resume.as_mut() {
                    Some(r) => {
                        r.pending = None;
                        r.count(if result.is_ok() { "resumed" } else { "failed" });
                        std::mem::take(&mut r.lost)
                    }
                    None => String::new(),
                };
                match result {
                    Ok(resumed) => this.resumed(resumed),
                    Err(why) => return this.fail(format!("{lost}; not resumed: {why}")),
                }
                continue;
            }
            if let Some(frame) = this.first.take() {
                match this.passed(frame) {
                    Some(frame) => return Poll::Ready(Some(Ok(frame))),
                    None => continue,
                }
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(None) => match this.ended() {
                    Some(poll) => return poll,
                    None => continue,
                },
                Poll::Ready(Some(Ok(frame))) => {
                    // hyper stops polling a body that says it has ended, so the last frame is
                    // where the connection goes back.
                    if this.inner.is_end_stream() && this.resume.is_none() {
                        this.release();
                    }
                    match this.passed(frame) {
                        Some(frame) => return Poll::Ready(Some(Ok(frame))),
                        None => continue,
                    }
                }
                Poll::Ready(Some(Err(e))) => match this.endpoint_failed(error_chain(&e)) {
                    Some(poll) => return poll,
                    None => continue,
                },
                Poll::Pending => {
                    let expired = this
                        .idle
                        .as_mut()
                        .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready());
                    return match (expired, this.idle_after) {
                        (true, Some(after)) => {
                            match this.endpoint_failed(format!(
                                "no chunk for streamIdleTimeout {after:?}"
                            )) {
                                Some(poll) => poll,
                                None => continue,
                            }
                        }
                        _ => Poll::Pending,
                    };
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        // A resumable stream whose upstream ended may yet go on elsewhere.
        self.done || (self.resume.is_none() && self.first.is_none() && self.inner.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        match &self.first {
            _ if self.done => SizeHint::with_exact(0),
            // What a continuation will send is not known.
            _ if self.resume.is_some() => SizeHint::default(),
            Some(f) => {
                let first = f.data_ref().map_or(0, |d| d.len() as u64);
                let rest = self.inner.size_hint();
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower().saturating_add(first));
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper.saturating_add(first));
                }
                hint
            }
            None => self.inner.size_hint(),
        }
    }
}
