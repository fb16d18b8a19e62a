//! The gRPC `envoy.service.ext_proc.v3.ExternalProcessor` service: each `Process` stream gets
//! an [`Exchange`], and the stream of answers drives it: polling the answers reads Envoy's
//! messages, waits out the steps that could not finish at once (a key reload, the rate-limit
//! store, the flow-control queue; see [`crate::wait`]) and fires the `routeTimeout` deadline. No task or
//! channel per request: every message costs one wake-up of the connection's task, not three.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::ExternalProcessor;
use envoy_types::pb::envoy::service::ext_proc::v3::{ProcessingRequest, ProcessingResponse};
use futures_util::Stream;
use tokio::time::{Instant, Sleep};
use tonic::{Request, Response, Status, Streaming};

use crate::exchange::Exchange;
use crate::processor::Processor;
use crate::wait::Pending;

/// The ext_proc gRPC service.
#[derive(Debug, Clone)]
pub struct ExtProcService {
    processor: Arc<Processor>,
}

impl ExtProcService {
    /// The service over `processor`.
    pub fn new(processor: Arc<Processor>) -> Self {
        Self { processor }
    }
}

/// Answers to one stream, in order.
pub type AnswerStream = Pin<Box<dyn Stream<Item = Result<ProcessingResponse, Status>> + Send>>;

#[tonic::async_trait]
impl ExternalProcessor for ExtProcService {
    type ProcessStream = AnswerStream;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        let answers = Answers {
            exchange: Exchange::new(Arc::clone(&self.processor)),
            inbound: request.into_inner(),
            ready: VecDeque::new(),
            pending: None,
            deadline: None,
            over: false,
        };
        Ok(Response::new(Box::pin(answers)))
    }
}

/// One stream's answers. Polling it feeds the exchange whatever is ready — Envoy's next
/// message, the outcome of the step it waits on, the deadline — and yields the exchange's
/// answers in order.
/// Dropping it (the stream ends, or Envoy goes away) drops the exchange, which ends its
/// accounting and leaves any queue, so an endpoint's in-flight count never outlives the stream.
struct Answers {
    exchange: Exchange,
    inbound: Streaming<ProcessingRequest>,
    ready: VecDeque<ProcessingResponse>,
    pending: Option<Pending>,
    deadline: Option<(Instant, Pin<Box<Sleep>>)>,
    over: bool,
}

impl Answers {
    /// Arms (or disarms) the timer for the exchange's current deadline.
    fn arm(&mut self) {
        match (self.exchange.deadline(), &mut self.deadline) {
            (None, d) => *d = None,
            (Some(at), Some((armed, _))) if *armed == at => {}
            // Re-armed for each chunk of a response (its idle timeout): the timer is reset, not
            // made anew.
            (Some(at), Some((armed, sleep))) => {
                sleep.as_mut().reset(at);
                *armed = at;
            }
            (Some(at), d) => *d = Some((at, Box::pin(tokio::time::sleep_until(at)))),
        }
    }

    fn take(&mut self, answers: Vec<ProcessingResponse>) {
        self.ready.extend(answers);
        if let Some(p) = self.exchange.take_pending() {
            self.pending = Some(p);
        }
        self.arm();
    }
}

impl Stream for Answers {
    type Item = Result<ProcessingResponse, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(a) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(a)));
            }
            // Nothing more to say: ending our side lets both ends free the stream now.
            if this.over || this.exchange.is_done() {
                return Poll::Ready(None);
            }
            if let Some(p) = this.pending.as_mut() {
                if let Poll::Ready(resumed) = p.as_mut().poll(cx) {
                    this.pending = None;
                    let answers = this.exchange.on_resumed(resumed);
                    this.take(answers);
                    continue;
                }
            }
            if let Some((_, sleep)) = this.deadline.as_mut() {
                if sleep.as_mut().poll(cx).is_ready() {
                    this.deadline = None;
                    let answers = this.exchange.on_deadline();
                    this.take(answers);
                    continue;
                }
            }
            match Pin::new(&mut this.inbound).poll_next(cx) {
                Poll::Ready(Some(Ok(msg))) => match this.exchange.on_message(msg) {
                    Ok(answers) => this.take(answers),
                    Err(e) => {
                        tracing::warn!(error = %e, "closing the ext_proc stream");
                        this.over = true;
                        return Poll::Ready(Some(Err(Status::failed_precondition(e.to_string()))));
                    }
                },
                // Envoy closed its side: the request is over (finished or abandoned).
                Poll::Ready(None) => this.over = true,
                Poll::Ready(Some(Err(status))) => {
                    tracing::debug!(%status, "ext_proc stream broken by the proxy");
                    this.over = true;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
