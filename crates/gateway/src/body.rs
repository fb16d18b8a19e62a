//! Bodies on the HTTP front: the request's, read whole and bounded (413), and the response's —
//! a small buffered answer (errors, `/v1/models`) or an upstream response streamed through as
//! it arrives.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::CONTENT_LENGTH;
use hyper::{HeaderMap, Response};
use infergate_pipeline::rewrite::restore::RestoreBody;
use infergate_pipeline::{ApiError, BoxError};

use crate::proxy::stream::ProxyBody;

/// Reads the whole body, refusing with 413 as soon as it is known to be over `limit`: at once
/// from `Content-Length`, else when the bytes read pass it.
pub async fn read_body(body: Incoming, headers: &HeaderMap, limit: u64) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::too_large(limit));
    }
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::too_large(limit)),
        Err(e) => Err(ApiError::body_read(e)),
    }
}

/// The response that answers `e`.
pub fn error_response(e: ApiError) -> Response<ResponseBody> {
    e.into_response().map(ResponseBody::full)
}

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
