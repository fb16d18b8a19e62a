//! Errors as clients see them: OpenAI-shaped JSON (`{"error": {"message", "type", "code"}}`)
//! with the status that says what happened. Each constructor is one failure the gateway
//! understands, so the status and the body are decided in one place.

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Response, StatusCode};

use crate::body::ResponseBody;

/// The reference message for a request naming no served model.
pub const NO_MATCHING_MODEL: &str =
    "no matching model: set the model in the request body or the x-gateway-model-name header";

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    kind: &'static str,
    code: &'static str,
    message: String,
    retry_after_secs: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: String) -> Self {
        Self {
            status,
            kind,
            code,
            message,
            retry_after_secs: None,
        }
    }

    /// 400: the body is not JSON (or not a JSON object).
    pub fn bad_json(reason: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_json",
            format!("the request body is not a JSON object: {reason}"),
        )
    }

    /// 400: neither the body's `model` nor the `x-gateway-model-name` header names a model.
    pub fn no_model() -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "model_required",
            "the request names no model: set `model` in the body or the x-gateway-model-name header"
                .into(),
        )
    }

    /// 404: no pool serves the model.
    pub fn unknown_model() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            NO_MATCHING_MODEL.into(),
        )
    }

    /// 404: no such route.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "not_found",
            format!("no route for {path}"),
        )
    }

    /// 405: a route asked with the wrong method.
    pub fn method_not_allowed(path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            "method_not_allowed",
            format!("method not allowed on {path}"),
        )
    }

    /// 413: the body is larger than `bbr.maxRequestBodyBytes`.
    pub fn too_large(limit: u64) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            "request_too_large",
            format!("the request body is larger than {limit} bytes (bbr.maxRequestBodyBytes)"),
        )
    }

    /// 400: the body could not be read from the client.
    pub fn body_read(reason: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "body_read_failed",
            format!("the request body could not be read: {reason}"),
        )
    }

    /// 429: every candidate endpoint of the pool is saturated.
    pub fn saturated(pool: &str, retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "pool_saturated",
            format!(
                "every endpoint of pool `{pool}` is saturated; retry after {retry_after_secs} s"
            ),
        );
        e.retry_after_secs = Some(retry_after_secs);
        e
    }

    /// 503: the pool has no endpoint to send the request to.
    pub fn no_endpoint(pool: &str, why: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "no_endpoint",
            format!("pool `{pool}` has no endpoint for this request: {why}"),
        )
    }

    /// 503: every endpoint tried failed before answering.
    pub fn upstream_unavailable(pool: &str, tried: usize, last: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "upstream_unavailable",
            format!("pool `{pool}`: {tried} endpoint(s) tried, none answered (last: {last})"),
        )
    }

    /// 504: the pool's `routeTimeout` passed before the upstream answered.
    pub fn timeout(pool: &str, after: std::time::Duration) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "route_timeout",
            format!("pool `{pool}`: no answer within routeTimeout {after:?}"),
        )
    }

    /// 503: the gateway is shutting down.
    pub fn draining() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "draining",
            "the gateway is shutting down".into(),
        )
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The OpenAI error `type`.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The OpenAI error `code`.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `{"error": {...}}` as bytes.
    pub fn body(&self) -> Bytes {
        let v = serde_json::json!({"error": {
            "message": self.message,
            "type": self.kind,
            "param": null,
            "code": self.code,
        }});
        Bytes::from(v.to_string())
    }

    /// The response, with `Retry-After` when the error has one.
    pub fn into_response(self) -> Response<ResponseBody> {
        let mut resp = Response::new(ResponseBody::full(self.body()));
        *resp.status_mut() = self.status;
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.code,
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_openai_shaped_with_their_status() {
        let e = ApiError::unknown_model();
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
        assert_eq!(v["error"]["message"], NO_MATCHING_MODEL);
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "model_not_found");
    }

    #[test]
    fn a_shed_request_carries_retry_after() {
        let resp = ApiError::saturated("p", 3).into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[RETRY_AFTER], "3");
    }
}
