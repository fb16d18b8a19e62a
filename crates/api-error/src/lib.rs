//! Errors as clients see them: OpenAI-shaped JSON (`{"error": {"message", "type", "code"}}`)
//! with the status that says what happened. Each constructor is one failure the gateway
//! understands, so the status and the body are decided in one place — for both fronts (the
//! HTTP front answers with [`ApiError::into_response`], the ext_proc front with an immediate
//! response built from the same parts) and for the control plane's services that refuse a
//! request (flow control, rate limits, signing keys).

#![forbid(unsafe_code)]

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};
use infergate_config::gateway::Band;
use infergate_flow::limit::{LimitKind, Limited, RefusedBy, LIMIT_UNAVAILABLE, RATE_LIMITED};
use infergate_flow::{DropReason, Rejection};

/// The header naming why flow control refused a request (llm-d's name for it).
pub const DROPPED_REASON: &str = "x-llm-d-request-dropped-reason";

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
    /// The bearer challenge of a refused token (RFC 6750 §3); boxed to keep the error small.
    www_authenticate: Option<Box<str>>,
    /// Why flow control refused the request ([`DROPPED_REASON`]).
    dropped_reason: Option<&'static str>,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: String) -> Self {
        Self {
            status,
            kind,
            code,
            message,
            retry_after_secs: None,
            www_authenticate: None,
            dropped_reason: None,
        }
    }

    /// 401 (missing or invalid token), 403 (valid, but its claims are not allowed) or 400
    /// (ambiguous `Authorization`), with the `WWW-Authenticate` challenge of `realm`. The
    /// refusal's message carries no part of the token.
    pub fn refused(refusal: &infergate_auth::Refusal, realm: &str) -> Self {
        let (status, kind) = match refusal.status() {
            403 => (StatusCode::FORBIDDEN, "permission_error"),
            400 => (StatusCode::BAD_REQUEST, "invalid_request_error"),
            _ => (StatusCode::UNAUTHORIZED, "authentication_error"),
        };
        let mut e = Self::new(
            status,
            kind,
            refusal.error_code().unwrap_or("missing_token"),
            refusal.to_string(),
        );
        e.www_authenticate = Some(refusal.www_authenticate(realm).into());
        e
    }

    /// 503: a token arrived but no signing key set has loaded yet (the issuer's JWKS could
    /// not be fetched); the client may retry.
    pub fn keys_unavailable() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "keys_unavailable",
            "the gateway has no signing keys to verify tokens with yet; retry shortly".into(),
        )
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

    /// 408: the body did not arrive whole within `spec.listen.connections.bodyTimeout`.
    pub fn body_timeout(after: std::time::Duration) -> Self {
        Self::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_request_error",
            "body_timeout",
            format!(
                "the request body did not arrive within {after:?} \
                 (listen.connections.bodyTimeout)"
            ),
        )
    }

    /// 503: buffering this body would pass `spec.bbr.maxBufferedBodyBytes`, the request bytes
    /// the gateway holds at once over every request.
    pub fn body_budget(limit: u64) -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "body_budget_exhausted",
            format!(
                "the gateway is holding {limit} bytes of request bodies \
                 (bbr.maxBufferedBodyBytes); retry shortly"
            ),
        );
        e.retry_after_secs = Some(1);
        e
    }

    /// 400: an HTTP/1.1 request without exactly one `Host` header (RFC 9112, section 3.2).
    pub fn bad_host(found: usize) -> Self {
        let why = if found == 0 {
            "has no Host header".to_owned()
        } else {
            format!("has {found} Host headers")
        };
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "bad_host",
            format!("an HTTP/1.1 request needs exactly one Host header; this one {why}"),
        )
    }

    /// 417: an `Expect` other than `100-continue` (RFC 9110, section 10.1.1).
    pub fn expectation_failed() -> Self {
        Self::new(
            StatusCode::EXPECTATION_FAILED,
            "invalid_request_error",
            "expectation_failed",
            "the only expectation the gateway meets is `Expect: 100-continue`".into(),
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

    /// 429: a sheddable request and the pool is saturated (`rejected-saturated`).
    pub fn saturated(pool: &str, retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "pool_saturated",
            format!(
                "pool `{pool}` is saturated and sheds sheddable requests; retry after \
                 {retry_after_secs} s"
            ),
        );
        e.retry_after_secs = Some(retry_after_secs);
        e.dropped_reason = Some(DropReason::Saturated.as_str());
        e
    }

    /// A refusal by flow control, with its status (429, or 503 for a queue TTL run out), its
    /// `Retry-After` and its dropped reason.
    pub fn flow_refused(pool: &str, band: Band, r: &Rejection) -> Self {
        let secs = r.retry_after.map(|d| d.as_secs().max(1));
        let retry = secs.map_or(String::new(), |s| format!("; retry after {s} s"));
        let mut e = match r.reason {
            DropReason::Saturated => return Self::saturated(pool, secs.unwrap_or(1)),
            DropReason::QueueFull => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "queue_full",
                format!("the {band} queue of pool `{pool}` is full{retry}"),
            ),
            DropReason::Displaced => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "queue_displaced",
                format!(
                    "a request of a higher band took this {band} request's place in the full \
                     queue of pool `{pool}`{retry}"
                ),
            ),
            DropReason::TtlExpired => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "service_unavailable",
                "queue_timeout",
                format!(
                    "no capacity in pool `{pool}` within the {band} queue's TTL \
                     (spec.flowControl queueTtl){retry}"
                ),
            ),
            DropReason::Overloaded => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "pool_overloaded",
                format!(
                    "pool `{pool}` is over capacity: its {band} queue has not emptied for the \
                     overload interval and this request waited past the overload wait \
                     (spec.flowControl.overload){retry}"
                ),
            ),
        };
        e.retry_after_secs = secs;
        e.dropped_reason = Some(r.reason.as_str());
        e
    }

    /// 429: the tenant is over a rate limit (`rejected-rate-limited`), with `Retry-After`
    /// from its bucket; without one when the request can never fit (it asks for more tokens
    /// than the tenant's whole minute).
    pub fn rate_limited(tenant: Option<&str>, limited: &Limited, tokens: u64) -> Self {
        let who = tenant.map_or("requests naming no tenant".to_owned(), |t| {
            format!("tenant `{t}`")
        });
        let secs = limited.retry_after_secs();
        let message = match (limited.by, secs) {
            (RefusedBy::Limit(LimitKind::Tokens), None) => format!(
                "the request's estimated {tokens} tokens (prompt plus max_tokens) exceed the \
                 {} tokens per minute of {who}; lower max_tokens",
                limited.limit
            ),
            (RefusedBy::Limit(kind), _) => format!(
                "{who} is over its limit of {} {} per {}; retry after {} s",
                limited.limit,
                kind.as_str(),
                match kind {
                    LimitKind::Requests => "second",
                    LimitKind::Tokens => "minute",
                },
                secs.unwrap_or(1)
            ),
            (RefusedBy::TooManyTenants, _) => format!(
                "the gateway tracks as many rate-limited tenants as it can; retry after {} s",
                secs.unwrap_or(1)
            ),
        };
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "rate_limit_exceeded",
            message,
        );
        e.retry_after_secs = secs;
        e.dropped_reason = Some(RATE_LIMITED);
        e
    }

    /// 503: the shared rate-limit store cannot be asked and `onStoreError` is `failClosed`
    /// (`rejected-rate-limit-unavailable`).
    pub fn limit_unavailable() -> Self {
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "rate_limit_unavailable",
            "the rate-limit store cannot be reached and the gateway fails closed; retry shortly"
                .into(),
        );
        e.retry_after_secs = Some(1);
        e.dropped_reason = Some(LIMIT_UNAVAILABLE);
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

    /// 504: every endpoint tried let its `firstByteTimeout` pass without a byte, the last one
    /// after `after`.
    pub fn first_byte_timeout(pool: &str, tried: usize, after: std::time::Duration) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "first_byte_timeout",
            format!(
                "pool `{pool}`: {tried} endpoint(s) tried, none began its answer within its \
                 firstByteTimeout (the last: {after:?})"
            ),
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

    /// 404 from the global tier: no member's status lists `model`.
    pub fn no_member_serves(model: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            format!("global tier: no member gateway serves model `{model}`"),
        )
    }

    /// 503 from the global tier: members serve `model`, but none is available now (stale,
    /// ejected or not yet read); the request was not sent anywhere.
    pub fn no_member_available(model: &str) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "service_unavailable",
            "no_member_available",
            format!(
                "global tier: no member gateway serving `{model}` is available now; not dispatched"
            ),
        )
    }

    /// 429 from the global tier: every member serving `model` is saturated.
    pub fn members_saturated(model: &str, retry_after_secs: u64) -> Self {
        let mut e = Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "members_saturated",
            format!(
                "global tier: every member gateway serving `{model}` is saturated; retry after                  {retry_after_secs} s"
            ),
        );
        e.retry_after_secs = Some(retry_after_secs);
        e
    }

    /// 502 from the global tier: `tried` members failed before answering (unreachable, closed,
    /// or answered 502/503), the last with `last`.
    pub fn members_failed(tried: usize, last: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::BAD_GATEWAY,
            "bad_gateway",
            "members_failed",
            format!("global tier: {tried} member gateway(s) tried, none answered (last: {last})"),
        )
    }

    /// 504 from the global tier: the member tried began no answer within `after`.
    pub fn member_timeout(member: &str, after: std::time::Duration) -> Self {
        Self::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "member_first_byte_timeout",
            format!("global tier: member `{member}` began no answer within {after:?}"),
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

    /// Why flow control refused the request (the [`DROPPED_REASON`] header), if it did.
    pub fn dropped_reason(&self) -> Option<&'static str> {
        self.dropped_reason
    }

    /// Seconds the client should wait before retrying (the `Retry-After` header), if any.
    pub fn retry_after_secs(&self) -> Option<u64> {
        self.retry_after_secs
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

    /// The response, with `Retry-After`, `WWW-Authenticate` and the dropped reason when the
    /// error has them; a front maps the body into its own body type.
    pub fn into_response(self) -> Response<Bytes> {
        let mut resp = Response::new(self.body());
        *resp.status_mut() = self.status;
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.retry_after_secs {
            headers.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        // The challenge is built from visible ASCII only, so it is always a valid value.
        if let Some(challenge) = self
            .www_authenticate
            .and_then(|c| HeaderValue::from_str(&c).ok())
        {
            headers.insert(WWW_AUTHENTICATE, challenge);
        }
        if let Some(reason) = self.dropped_reason {
            headers.insert(DROPPED_REASON, HeaderValue::from_static(reason));
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
    fn a_refused_token_gets_its_status_and_a_bearer_challenge() {
        use infergate_auth::Refusal;
        let resp = ApiError::refused(&Refusal::Expired, "idp").into_response();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            resp.headers()[WWW_AUTHENTICATE],
            "Bearer realm=\"idp\", error=\"invalid_token\", error_description=\"the token has expired\""
        );
        let e = ApiError::refused(&Refusal::ClaimMissing("team".into()), "idp");
        assert_eq!(e.status(), StatusCode::FORBIDDEN);
        assert_eq!(e.code(), "insufficient_scope");
        assert_eq!(e.kind(), "permission_error");
        let e = ApiError::refused(&Refusal::Missing, "idp");
        assert_eq!(
            (e.status(), e.code()),
            (StatusCode::UNAUTHORIZED, "missing_token")
        );
        assert_eq!(
            e.into_response().headers()[WWW_AUTHENTICATE],
            "Bearer realm=\"idp\""
        );
    }

    #[test]
    fn a_shed_request_carries_retry_after() {
        let resp = ApiError::saturated("p", 3).into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[RETRY_AFTER], "3");
        assert_eq!(resp.headers()[DROPPED_REASON], "rejected-saturated");
    }

    #[test]
    fn flow_refusals_carry_their_status_reason_and_retry_after() {
        let cases = [
            (DropReason::Saturated, Some(4), 429, "pool_saturated"),
            (DropReason::QueueFull, Some(2), 429, "queue_full"),
            (DropReason::Displaced, Some(1), 429, "queue_displaced"),
            (DropReason::TtlExpired, None, 503, "queue_timeout"),
            (DropReason::Overloaded, Some(3), 429, "pool_overloaded"),
        ];
        for (reason, secs, status, code) in cases {
            let r = Rejection {
                reason,
                retry_after: secs.map(std::time::Duration::from_secs),
            };
            let e = ApiError::flow_refused("p", Band::Standard, &r);
            assert_eq!((e.status().as_u16(), e.code()), (status, code));
            assert_eq!(e.dropped_reason(), Some(reason.as_str()));
            let resp = e.into_response();
            assert_eq!(resp.headers()[DROPPED_REASON], reason.as_str());
            let retry = resp.headers().get(RETRY_AFTER).map(|v| v.to_str().unwrap());
            assert_eq!(retry, secs.map(|s| s.to_string()).as_deref(), "{reason:?}");
        }
        let e = ApiError::unknown_model().into_response();
        assert!(e.headers().get(DROPPED_REASON).is_none());
    }
}
