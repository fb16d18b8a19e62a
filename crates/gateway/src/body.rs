//! The gateway's response body: a small buffered answer (errors, `/v1/models`) or an upstream
//! response streamed through as it arrives.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, SizeHint};

use crate::proxy::stream::ProxyBody;
use crate::rewrite::response::RestoreBody;

/// Errors a response body can end with (the connection is then aborted).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body.
#[derive(Debug)]
pub enum ResponseBody {
    /// Everything at once.
    Full(Full<Bytes>),
    /// An upstream body, frame by frame.
    Proxy(Box<ProxyBody>),
    /// An upstream body of a rewritten request, its model renamed back on the way.
    Restored(Box<RestoreBody<ProxyBody>>),
}

impl ResponseBody {
    /// A body of `bytes`.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        ResponseBody::Full(Full::new(bytes.into()))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ResponseBody::Full(f) => Pin::new(f)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(|never| match never {}))),
            ResponseBody::Proxy(p) => Pin::new(p.as_mut()).poll_frame(cx),
            ResponseBody::Restored(r) => Pin::new(r.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(f) => f.is_end_stream(),
            ResponseBody::Proxy(p) => p.is_end_stream(),
            ResponseBody::Restored(r) => r.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(f) => f.size_hint(),
            ResponseBody::Proxy(p) => p.size_hint(),
            ResponseBody::Restored(r) => r.size_hint(),
        }
    }
}
