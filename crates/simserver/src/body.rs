//! The response body type every route answers with: a whole body, or an event stream.

use crate::answer::SseBody;
use crate::error::ApiError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A response body.
#[derive(Debug)]
pub(crate) enum ResponseBody {
    /// All of it at once (taken on the first poll).
    Full(Option<Bytes>),
    /// Server-sent events.
    Sse(Box<SseBody>),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ResponseBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ResponseBody::Sse(sse) => Pin::new(sse.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Full(bytes) => bytes.is_none(),
            ResponseBody::Sse(sse) => sse.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ResponseBody::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            ResponseBody::Full(None) => SizeHint::with_exact(0),
            ResponseBody::Sse(sse) => sse.size_hint(),
        }
    }
}

/// A response with a whole body and a content type.
pub(crate) fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::Full(Some(body.into())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A JSON response.
pub(crate) fn json(status: StatusCode, body: impl Into<Bytes>) -> Response<ResponseBody> {
    full(status, "application/json", body)
}

/// An empty response.
pub(crate) fn empty(status: StatusCode) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::Full(None));
    *response.status_mut() = status;
    response
}

/// An event stream response.
pub(crate) fn sse(body: SseBody) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::Sse(Box::new(body)));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    response
}

impl ApiError {
    /// The error as an HTTP response.
    pub(crate) fn into_response(self) -> Response<ResponseBody> {
        json(self.status(), self.body())
    }
}
