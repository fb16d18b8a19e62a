//! The response's way back through the exchange: the served endpoint read from Envoy's
//! metadata, the accounting fed chunk by chunk, and, for a rewritten request, the `model` of
//! the answer renamed back to the client's as it passes.

use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::envoy::service::ext_proc::v3::ProcessingResponse;
use hyper::header::CONTENT_LENGTH;
use tokio::time::Instant;

use super::{Exchange, Phase};
use crate::answer::{Answer, Times};
use crate::metadata;
use crate::protocol::{self, Direction, Head};

impl Exchange {
    pub(super) fn respond(
        &mut self,
        head: &Head,
        md: Option<&Metadata>,
        end_of_stream: bool,
    ) -> Vec<ProcessingResponse> {
        let Some(routed) = self.routed.take() else {
            self.phase = Phase::Done;
            return vec![protocol::response_headers(Vec::new(), Vec::new())];
        };
        let served = metadata::served(md);
        let times = Times {
            started: self.started,
            dispatched: self.dispatched,
        };
        let (mut answer, endpoint) = Answer::start(
            &self.processor.handle,
            routed,
            served.as_deref(),
            head,
            times,
        );
        // A renamed body is as long as the client's name makes it, not as the upstream said.
        let remove = if answer.renames() {
            vec![CONTENT_LENGTH.as_str().to_owned()]
        } else {
            Vec::new()
        };
        let status = head.status.unwrap_or(0);
        let mut upstream = std::mem::take(&mut self.upstream);
        upstream.set("http.response.status_code", status);
        infergate_pipeline::trace::served_by(&mut upstream, &endpoint);
        let root = std::mem::take(&mut self.trace).answered(status);
        answer.trace(root, upstream);
        self.record.status = status;
        self.record.endpoint.clone_from(&endpoint);
        self.count();
        self.answer = Some(answer);
        self.phase = Phase::Response;
        // The answer has begun: `routeTimeout` is met, and silence is what is timed now.
        self.arm_idle();
        if end_of_stream {
            self.finish();
        }
        // The client sees where it was served, as with the standalone gateway.
        let set = vec![protocol::set_header(
            protocol::DESTINATION,
            endpoint.as_bytes(),
        )];
        vec![protocol::response_headers(set, remove)]
    }

    /// A response chunk: accounted for, renamed when the request was rewritten, passed on.
    pub(super) fn response_body(
        &mut self,
        chunk: Vec<u8>,
        end_of_stream: bool,
    ) -> Vec<ProcessingResponse> {
        if !chunk.is_empty() {
            self.arm_idle();
        }
        let mut out = match self.answer.as_mut() {
            Some(a) => a.on_data(chunk),
            None => chunk,
        };
        if end_of_stream {
            out.extend(self.finish());
        }
        protocol::pass_through(Direction::Response, out, end_of_stream)
    }

    fn arm_idle(&mut self) {
        self.deadline = self.stream_idle.map(|t| Instant::now() + t);
    }

    /// Response trailers: whatever the renamer still held goes out before them.
    pub(super) fn response_trailers(&mut self) -> Vec<ProcessingResponse> {
        let rest = self.finish();
        let mut out = protocol::pass_through(Direction::Response, rest, false);
        out.push(protocol::trailers(Direction::Response));
        out
    }

    /// The response ended: the accounting ends; returns the bytes the renamer still held.
    pub(super) fn finish(&mut self) -> Vec<u8> {
        let rest = match self.answer.take() {
            Some(mut a) => a.finish(),
            None => Vec::new(),
        };
        self.deadline = None;
        self.phase = Phase::Done;
        rest
    }
}
